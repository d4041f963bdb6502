"""Hardening of robot files, second round (issue #25): no silently wrong model,
no file that hangs or eats the machine, no raw Python exception, save/load
round trips.

Oracles: the SDFormat scoping rules (every element known by its scoped name
``outer::inner::x``; two elements with one scoped name are an error naming
both); poses of a chain of frames composed by hand with NumPy; the file kind
given by ``os.stat``; the documented limits (256 MiB and TREEDYN_MAX_FILE_BYTES,
32 nested SDF models, 16 levels of TOML arrays/tables); the model arrays before
and after a save/load round trip (bitwise equal).
"""
import os
import socket
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import treedyn as td
from treedyn import lie, robots
from treedyn.errors import InputError, ModelError, RobotFileError, TreedynError
from treedyn.io.files import DEFAULT_MAX_BYTES, ENV_MAX_BYTES
from treedyn.io.sdf import MAX_MODEL_DEPTH, parse_sdf_string
from treedyn.io.toml import MAX_NESTING, graph_to_dict, parse_toml_string
from treedyn.io.urdf import parse_urdf_string

ROBOT_DIR = os.path.dirname(robots.path("panda.urdf"))
SHIPPED = sorted(f for f in os.listdir(ROBOT_DIR) if f.endswith((".urdf", ".sdf", ".toml")))


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def raises_named(call, *fragments, kind=RobotFileError):
    with pytest.raises(kind) as info:
        call()
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return msg


def run_isolated(code, timeout=60, env=None):
    """Run ``code`` in a fresh interpreter (a hang fails the test instead of blocking
    the suite); returns (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


# ============================================================ 1. scoped names (SDF)
def inertial(mass):
    return f"<inertial><mass>{mass}</mass></inertial>"


def element(kind, name, mass=1.0):
    """A minimal element ``kind`` named ``name`` (a link of mass ``mass``)."""
    if kind == "link":
        return f'<link name="{name}">{inertial(mass)}</link>'
    if kind == "frame":
        return f'<frame name="{name}"/>'
    if kind == "joint":
        return (f'<joint name="{name}" type="fixed"><parent>world</parent>'
                f'<child>__model__</child></joint>')
    return f'<model name="{name}"><link name="inner">{inertial(mass)}</link></model>'


def nested(path, inner):
    """``inner`` wrapped in ``<model name=p>`` for p in ``path`` (outermost first)."""
    for p in reversed(path):
        inner = f'<model name="{p}">{inner}</model>'
    return inner


def sdf(body, version="1.7", world=False):
    model = f'<model name="m"><link name="base">{inertial(2.0)}</link>{body}</model>'
    if world:
        model = f'<world name="w">{model}</world>'
    return f'<sdf version="{version}">{model}</sdf>'


@pytest.mark.parametrize("kind", ["link", "joint", "frame", "model"])
@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("literal_first", [True, False])
@pytest.mark.parametrize("world", [False, True])
def test_scoped_name_collision_is_an_error_naming_both(kind, depth, literal_first, world):
    path = [f"n{k}" for k in range(depth)]
    scoped = "::".join(path + ["x"])
    literal = element(kind, scoped, 7.0)                   # <link name="n0::...::x">
    inside = nested(path, element(kind, "x", 1.0))        # <model name="n0">...<link name="x">
    body = literal + inside if literal_first else inside + literal
    msg = raises_named(lambda: parse_sdf_string(sdf(body, world=world)),
                       f"scoped name '{scoped}'", f'<{kind} name="{scoped}"> in the top model',
                       f"<{kind} name=\"x\"> in nested model '{'::'.join(path)}'")
    assert "rename" in msg


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_partly_scoped_name_collides_at_any_level(depth):
    """``<model name="a"><link name="b::x">`` against ``<model name="a"><model name="b">
    <link name="x">``: the collision is inside a nested model."""
    outer = [f"a{k}" for k in range(depth)]
    body = nested(outer, element("link", "b::x", 7.0) + nested(["b"], element("link", "x")))
    scoped = "::".join(outer + ["b", "x"])
    raises_named(lambda: parse_sdf_string(sdf(body)), f"scoped name '{scoped}'",
                 f"<link name=\"b::x\"> in nested model '{'::'.join(outer)}'",
                 "<link name=\"x\"> in nested model '" + "::".join(outer + ["b"]) + "'")


@pytest.mark.parametrize("a,b", [("link", "frame"), ("frame", "joint"), ("joint", "link"),
                                 ("model", "link")])
def test_cross_kind_collision_from_sdformat_1_7(a, b):
    body = element(a, "n::x") + nested(["n"], element(b, "x"))
    raises_named(lambda: parse_sdf_string(sdf(body, "1.7")), "scoped name 'n::x'")


@pytest.mark.parametrize("version", ["1.5", "1.6"])
def test_same_kind_collision_before_1_7(version):
    """Before 1.7 a link and a joint may share a name, but two links may not, even
    when written differently."""
    body = ('<link name="n::x"><inertial><mass>7</mass></inertial></link>'
            + nested(["n"], '<link name="x"><inertial><mass>1</mass></inertial></link>'))
    raises_named(lambda: parse_sdf_string(sdf(body, version)), "scoped name 'n::x'")


def test_distinct_scoped_names_keep_every_body():
    """The control: n::y beside n::x keeps both links with their masses (the 7 kg link
    no longer vanishes, and nothing is merged)."""
    body = (element("link", "n::y", 7.0) + nested(["n"], element("link", "x", 1.0))
            + '<joint name="j1" type="fixed"><parent>base</parent><child>n::y</child></joint>'
            + '<joint name="j2" type="fixed"><parent>base</parent><child>n::x</child></joint>')
    g = parse_sdf_string(sdf(body))
    assert sorted(g.bodies) == ["base", "n::x", "n::y"]
    assert g.body("n::y")["mass"] == 7.0 and g.body("n::x")["mass"] == 1.0


# ------------------------------------------------------------ mimic of a fixed joint
URDF_MIMIC = """<robot name="r"><link name="a"/><link name="b"/>
<link name="c"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial></link>
<joint name="f" type="fixed"><parent link="a"/><child link="b"/></joint>
<joint name="follower" type="{t}"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
<limit lower="-1" upper="1" effort="1" velocity="1"/><mimic joint="f" multiplier="2"/></joint>
</robot>"""


@pytest.mark.parametrize("t", ["revolute", "continuous", "prismatic"])
def test_urdf_mimic_of_a_fixed_joint_names_the_fixed_leader(tmp_path, t):
    p = write(tmp_path, "r.urdf", URDF_MIMIC.format(t=t))
    msg = raises_named(lambda: td.load(p), str(p), '<joint name="follower">',
                       "joint 'follower' mimics 'f', a fixed joint")
    assert "make 'f' a moving joint" in msg


def test_toml_and_graph_mimic_of_a_fixed_joint(tmp_path):
    text = """[[body]]\nname = "a"\nmass = 1.0\n[[body]]\nname = "b"\nmass = 1.0
[[joint]]\nname = "f"\ntype = "fixed"\nparent = "world"\nchild = "a"
[[joint]]\nname = "k"\ntype = "revolute"\nparent = "a"\nchild = "b"\naxis = [0.0, 0.0, 1.0]
[[mimic]]\njoint = "k"\nleader = "f"\n"""
    p = write(tmp_path, "r.toml", text)
    raises_named(lambda: td.load(p), str(p), "[[mimic]] #0", "joint 'k' mimics 'f', a fixed")
    g = td.JointGraph("g")
    g.add_body("a", mass=1.0)
    g.add_body("b", mass=1.0)
    g.add_joint("f", "fixed", "world", "a")
    g.add_joint("k", "prismatic", "a", "b", axis=[1, 0, 0])
    g.add_mimic("k", "f", 0.5, 0.1)
    raises_named(g.compile, "joint 'k' mimics 'f', a fixed joint", kind=ModelError)


def test_mimic_by_a_fixed_follower_is_warned_naming_the_fixed_joint():
    text = URDF_MIMIC.format(t="revolute").replace(
        '<mimic joint="f" multiplier="2"/>', "").replace(
        '<joint name="f" type="fixed"><parent link="a"/><child link="b"/></joint>',
        '<joint name="f" type="fixed"><parent link="a"/><child link="b"/>'
        '<mimic joint="follower"/></joint>')
    with pytest.warns(UserWarning, match=r"fixed joint\(s\) \['f'\]"):
        model = parse_urdf_string(text).compile()
    assert not model.mimic


# ------------------------------------------------------------ elements read past
def test_include_in_a_world_is_warned_about_by_name():
    text = ('<sdf version="1.7"><world name="w"><include><uri>model://sun</uri></include>'
            '<include><uri>model://ground_plane</uri></include>'
            f'<model name="m"><link name="a">{inertial(1)}</link></model></world></sdf>')
    with pytest.warns(UserWarning, match=r'<world name="w">: <include> model://sun, <include> '
                                         r"model://ground_plane not read"):
        g = parse_sdf_string(text)
    assert g.bodies == ["a"]


@pytest.mark.parametrize("extra,fragments", [
    ("<include><uri>model://robot</uri></include>", ("0 non-static models", "<include>")),
    ("<population name='p'><model name='x'><link name='l'/></model></population>",
     ("0 non-static models", "<population>")),
])
def test_world_without_its_model_names_what_is_not_read(extra, fragments):
    text = f'<sdf version="1.7"><world name="w">{extra}</world></sdf>'
    raises_named(lambda: parse_sdf_string(text), '<world name="w">', *fragments)


def test_include_in_a_model_and_joint_in_a_world_are_refused():
    inc = sdf("<include><uri>model://arm</uri></include>")
    raises_named(lambda: parse_sdf_string(inc), "<include> needs other files")
    inc2 = sdf(nested(["n", "o"], "<include><uri>model://arm</uri></include>"))
    raises_named(lambda: parse_sdf_string(inc2), '<model name="n::o">', "<include>")
    wj = sdf("", world=True).replace(
        "<model", '<joint name="wj" type="fixed"><parent>world</parent><child>m::base</child>'
                  '</joint><model')
    raises_named(lambda: parse_sdf_string(wj), '<world name="w"><joint name="wj">',
                 "not read")


@pytest.mark.parametrize("fmt,text,fragments", [
    ("urdf", '<robot name="r"><link name="a"><inertail><mass value="3"/></inertail></link>'
             "</robot>", ['<link name="a"><inertail>', "not URDF elements"]),
    ("urdf", '<robot name="r"><link name="a"/><link name="b"/><joint name="j" '
             'type="continuous"><parent link="a"/><child link="b"/><dynamics damping="0.5" '
             'friction="0"/><sprocket/></joint></robot>',
     ['<joint name="j"><sprocket>']),      # damping is read (issue 33), not warned
    ("sdf", sdf('<joint name="j" type="revolute"><parent>base</parent><child>c</child><axis>'
                "<dynamics><damping>0.1</damping><spring_stiffness>3</spring_stiffness>"
                "</dynamics></axis></joint><link name=\"c\"><gravity>false</gravity></link>"),
     ['<link name="c"><gravity>false</gravity>']),   # damping, springs: read (issue 33)
])
def test_elements_that_change_the_dynamics_are_warned_about(tmp_path, fmt, text, fragments):
    p = write(tmp_path, f"r.{fmt}", text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        td.load(p)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1, msgs
    assert caught[0].filename == __file__            # attributed to the caller
    for frag in fragments + [str(p), "not read"]:
        assert frag in msgs[0], (frag, msgs[0])


@pytest.mark.parametrize("fmt", ["urdf", "sdf"])
def test_continuous_joint_keeps_effort_and_velocity_limits(tmp_path, fmt):
    """They were dropped without a word; a continuous joint has no position limits
    (URDF and SDFormat both say lower/upper do not apply)."""
    if fmt == "urdf":
        text = ('<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/>'
                '<inertia ixx="1" iyy="1" izz="1"/></inertial></link><joint name="j" '
                'type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>'
                '<limit lower="-1" upper="1" effort="12.5" velocity="3.25"/></joint></robot>')
    else:
        text = sdf('<link name="b"/><joint name="j" type="continuous"><parent>base</parent>'
                   "<child>b</child><axis><xyz>0 0 1</xyz><limit><lower>-1</lower><upper>1"
                   "</upper><effort>12.5</effort><velocity>3.25</velocity></limit></axis>"
                   "</joint>")
    m = td.load(write(tmp_path, f"c.{fmt}", text))
    assert (m.effort_limit[0], m.velocity_limit[0]) == (12.5, 3.25)
    assert (m.lower_limit[0], m.upper_limit[0]) == (-np.inf, np.inf)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_robots_load_without_warnings(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        td.load(robots.path(name))


def test_zero_dynamics_are_not_warned_about():
    text = ('<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="continuous">'
            '<parent link="a"/><child link="b"/><dynamics damping="0" friction="0.0"/></joint>'
            "</robot>")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_urdf_string(text)


# ============================================================ 2. files that hang
READERS = ["x.urdf", "x.sdf", "x.toml"]


@pytest.mark.parametrize("name", READERS)
def test_fifo_is_refused_without_blocking(tmp_path, name):
    p = tmp_path / name
    os.mkfifo(p)
    code, out, err = run_isolated(f"""
        import treedyn as td
        try:
            td.load({str(p)!r})
        except td.RobotFileError as exc:
            print(exc)
        """, timeout=60)
    assert code == 0, err
    assert str(p) in out and "a FIFO (named pipe), not a regular file" in out, out


@pytest.mark.parametrize("command", ["info", "convert"])
@pytest.mark.parametrize("name", READERS)
def test_cli_refuses_a_fifo_without_blocking(tmp_path, command, name):
    p = tmp_path / name
    os.mkfifo(p)
    argv = [command, str(p)] + ([str(tmp_path / "out.toml")] if command == "convert" else [])
    code, out, err = run_isolated(f"import sys; from treedyn.cli import main; "
                                  f"sys.exit(main({argv!r}))", timeout=60)
    assert code == 1, (out, err)
    assert "a FIFO (named pipe), not a regular file" in err and "Traceback" not in err
    assert not (tmp_path / "out.toml").exists()


def test_cli_convert_refuses_a_fifo_output_without_blocking(tmp_path):
    out = tmp_path / "out.toml"
    os.mkfifo(out)
    argv = ["convert", robots.path("two_link_arm.urdf"), str(out)]
    code, _, err = run_isolated(f"import sys; from treedyn.cli import main; "
                                f"sys.exit(main({argv!r}))", timeout=60)
    assert code == 2 and "not a regular file" in err, err
    assert stat.S_ISFIFO(os.stat(out).st_mode)


def test_fifo_swapped_in_after_the_check_does_not_block(tmp_path):
    """The race: os.stat said "regular file", then the path became a FIFO. The
    non-blocking open returns at once and fstat refuses it."""
    p = tmp_path / "x.urdf"
    os.mkfifo(p)
    code, out, err = run_isolated(f"""
        import os, stat
        import treedyn as td
        from treedyn.io import files
        real_stat = os.stat
        class Regular:
            st_mode, st_size = stat.S_IFREG | 0o644, 10
        files.os.stat = lambda path: Regular() if path == {str(p)!r} else real_stat(path)
        try:
            td.load({str(p)!r})
        except td.RobotFileError as exc:
            print(exc)
        """, timeout=60)
    assert code == 0, err
    assert "a FIFO (named pipe), not a regular file" in out, out


@pytest.mark.parametrize("name", READERS)
@pytest.mark.parametrize("target,kind", [("/dev/zero", "a character device"),
                                         ("/dev/null", "a character device"),
                                         (".", "a directory")])
def test_symlink_to_a_device_or_directory_is_refused(tmp_path, name, target, kind):
    if not os.path.exists(target):
        pytest.skip(f"no {target}")
    p = tmp_path / name
    os.symlink(os.path.abspath(target) if target == "." else target, p)
    raises_named(lambda: td.load(p), str(p), f"it is {kind}, not a regular file")


@pytest.mark.parametrize("name", READERS)
def test_directory_and_socket_are_refused(tmp_path, name):
    d = tmp_path / "d" / name
    d.mkdir(parents=True)
    raises_named(lambda: td.load(d), "it is a directory")
    s_path = tmp_path / name
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.bind(str(s_path))
        except OSError as exc:                      # pragma: no cover - e.g. path too long
            pytest.skip(f"cannot bind a socket: {exc}")
        assert stat.S_ISSOCK(os.stat(s_path).st_mode)
        raises_named(lambda: td.load(s_path), "it is a socket")


@pytest.mark.parametrize("name", SHIPPED)
def test_byte_limit_by_argument_and_environment(tmp_path, monkeypatch, name):
    src = robots.path(name)
    size = os.path.getsize(src)
    raises_named(lambda: td.load(src, max_bytes=size - 1),
                 f"larger than the limit of {size - 1} bytes ({size} bytes)",
                 "max_bytes", ENV_MAX_BYTES)
    td.load(src, max_bytes=size)                       # exactly at the limit: read
    monkeypatch.setenv(ENV_MAX_BYTES, str(size - 1))
    raises_named(lambda: td.load(src), f"limit of {size - 1} bytes")
    td.load(src, max_bytes=size)                       # the argument wins
    monkeypatch.setenv(ENV_MAX_BYTES, str(size))
    td.load(src)


def test_byte_limit_holds_for_files_whose_size_is_unknown(tmp_path):
    """/proc files report st_size 0: the cap is enforced while reading."""
    src = "/proc/self/status"
    if not os.path.exists(src):
        pytest.skip("no /proc")
    p = tmp_path / "x.urdf"
    os.symlink(src, p)
    raises_named(lambda: td.load(p, max_bytes=64), "larger than the limit of 64 bytes "
                                                   "(more than 64 bytes)")


def test_default_limit_and_bad_limits(monkeypatch):
    assert DEFAULT_MAX_BYTES == 256 * 1024 * 1024
    panda = robots.path("panda.urdf")
    for bad in (0, -1, 1.5, "10", True):
        raises_named(lambda: td.load(panda, max_bytes=bad), "max_bytes", kind=InputError)
    for bad in ("0", "ten", "-5"):
        monkeypatch.setenv(ENV_MAX_BYTES, bad)
        raises_named(lambda: td.load(panda), ENV_MAX_BYTES, kind=InputError)


def test_cli_honours_the_environment_limit(tmp_path):
    src = robots.path("panda.urdf")
    code, out, err = run_isolated(f"import sys; from treedyn.cli import main; "
                                  f"sys.exit(main(['info', {src!r}]))",
                                  env={ENV_MAX_BYTES: "100"})
    assert code == 1 and "larger than the limit of 100 bytes" in err, (out, err)


# ------------------------------------------------------------ chains of frames
def frame_chain(n, reverse, relative):
    """n frames, each attached to (or posed relative to) the previous one."""
    def frame(i):
        prev = "a" if i == 0 else f"f{i - 1}"
        if relative:
            return (f'<frame name="f{i}"><pose relative_to="{prev}">0.001 0 0 0 0 0.002'
                    f'</pose></frame>')
        return (f'<frame name="f{i}" attached_to="{prev}"><pose>0.001 0 0 0 0 0.002</pose>'
                f'</frame>')
    frames = [frame(i) for i in range(n)]
    if reverse:
        frames.reverse()
    return (f'<sdf version="1.7"><model name="m"><link name="a"><pose>0 0 1 0 0 0</pose>'
            f'{inertial(1)}</link>{"".join(frames)}</model></sdf>')


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("relative", [False, True])
def test_long_frame_chains_load_fast_and_right(reverse, relative):
    import time
    n = 3000
    t0 = time.perf_counter()
    g = parse_sdf_string(frame_chain(n, reverse, relative))
    elapsed = time.perf_counter() - t0
    assert elapsed < 20.0, elapsed                   # was minutes (cubic) or a RecursionError
    step = np.eye(4)
    step[:3, :3] = lie.rpy_to_rot([0.0, 0.0, 0.002])
    step[:3, 3] = (0.001, 0.0, 0.0)
    T = np.eye(4)
    for i in range(n):
        T = T @ step
        if i in (0, 1, 999, n - 1):
            body, pose = g.frames[f"f{i}"]
            assert body == "a"           # attached_to the chain, or to the model: link a
            np.testing.assert_allclose(pose, T, rtol=0, atol=1e-12)


@pytest.mark.parametrize("attr", ["attached_to", "relative_to"])
def test_cycle_at_the_end_of_a_long_chain_is_refused(attr):
    text = frame_chain(2000, False, attr == "relative_to")
    if attr == "attached_to":
        text = text.replace('<frame name="f0" attached_to="a">', '<frame name="f0" '
                            'attached_to="f1999">')
        frag = "attached to each other in a cycle"
    else:
        text = text.replace('<frame name="f0"><pose relative_to="a">',
                            '<frame name="f0"><pose relative_to="f1999">')
        frag = "relative to each other in a cycle"
    msg = raises_named(lambda: parse_sdf_string(text), frag, "1990 more (2000 in all)")
    assert len(msg) < 1000, len(msg)


# ============================================================ 3. named errors
@pytest.mark.parametrize("encoding", ["no-such-codec", "rot13", "base64", "shift_jis", "utf-7",
                                      "utf-32", "idna"])
@pytest.mark.parametrize("fmt", ["urdf", "sdf"])
def test_unsupported_xml_encoding_is_a_robot_file_error(tmp_path, encoding, fmt):
    root = '<robot name="r"><link name="a"/></robot>' if fmt == "urdf" else sdf("")
    p = tmp_path / f"x.{fmt}"
    p.write_bytes(f'<?xml version="1.0" encoding="{encoding}"?>{root}'.encode())
    raises_named(lambda: td.load(p), str(p), "<?xml encoding=...?>", "XML encoding")


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "utf-16"])
def test_supported_xml_encodings_still_load(tmp_path, encoding):
    p = tmp_path / "x.urdf"
    p.write_bytes(f'<?xml version="1.0" encoding="{encoding}"?><robot name="r">'
                  f'<link name="é"/></robot>'.encode(encoding))
    assert td.load_graph(p).bodies == ["é"]


def deep_models(depth, world=False):
    path = [f"d{k}" for k in range(depth)]
    return sdf(nested(path, element("link", "tip")), world=world).replace(
        f'<link name="base">{inertial(2.0)}</link>', "")


@pytest.mark.parametrize("world", [False, True])
def test_nested_sdf_models_up_to_the_limit_load(world):
    g = parse_sdf_string(deep_models(MAX_MODEL_DEPTH, world))
    assert g.bodies == ["::".join([f"d{k}" for k in range(MAX_MODEL_DEPTH)] + ["tip"])]


@pytest.mark.parametrize("depth", [MAX_MODEL_DEPTH + 1, 200, 5000])
@pytest.mark.parametrize("world", [False, True])
def test_too_deeply_nested_sdf_models_are_refused(tmp_path, depth, world):
    p = write(tmp_path, "deep.sdf", deep_models(depth, world))
    raises_named(lambda: td.load(p), str(p), f"nested models deeper than {MAX_MODEL_DEPTH}")


def nest(depth, kinds):
    """A TOML value nested ``depth`` levels: kinds[k] is "[" (array) or "{" (table)."""
    text = "1.0"
    for k in reversed(kinds[:depth]):
        text = f"[{text}]" if k == "[" else f"{{k = {text}}}"
    return text


# where a value sits and the level of the table/array holding it
PLACES = {"top": ("x = {v}\n", 0),
          "model": ("[model]\ngravity = {v}\n", 1),
          "body": ('[[body]]\nname = "a"\nmass = {v}\n', 2),
          "joint": ('[[joint]]\nname = "j"\ntype = "fixed"\nparent = "world"\nchild = "a"\n'
                    "limits = {v}\n", 2)}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", ["[", "{"])
@pytest.mark.parametrize("extra", [1, 2, 50, 3000])
def test_toml_nested_beyond_the_limit_is_refused(tmp_path, place, kind, extra):
    template, level = PLACES[place]
    depth = MAX_NESTING - level + extra
    p = write(tmp_path, "deep.toml", template.format(v=nest(depth, kind * depth)))
    raises_named(lambda: td.load(p), str(p), "nested", f"at most {MAX_NESTING}")


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", ["[", "{"])
def test_toml_nested_up_to_the_limit_is_not_a_nesting_error(place, kind):
    template, level = PLACES[place]
    depth = MAX_NESTING - level
    try:
        parse_toml_string(template.format(v=nest(depth, kind * depth)))
    except TreedynError as exc:
        assert "nested" not in str(exc), str(exc)


def test_toml_deep_dotted_keys_are_refused():
    keys = ".".join(["k"] * 3000)
    raises_named(lambda: parse_toml_string(f'[[body]]\nname = "a"\nmass.{keys} = 1\n'),
                 '[[body]] "a"', "nested more than")
    raises_named(lambda: parse_toml_string(f"[{keys}]\nx = 1\n"), "nested more than")


BIG = "9" * 400
TOML_FIELDS = [  # (text with {n} for the number, element, field)
    ('[[body]]\nname = "a"\nmass = {n}\n', '[[body]] "a"', "mass"),
    ('[[body]]\nname = "a"\ncom = [0, -{n}, 0]\n', '[[body]] "a"', "com[1]"),
    ('[[body]]\nname = "a"\ninertia = [[1, 0, 0], [0, 1, 0], [0, 0, {n}]]\n', '[[body]] "a"',
     "inertia[2][2]"),
    ('[[body]]\nname = "a"\ninertia = {{ixx = {n}}}\n', '[[body]] "a"', "inertia.ixx"),
    ('[[body]]\nname = "a"\nframe = {{origin = [{n}, 0, 0]}}\n', '[[body]] "a"',
     "frame.origin[0]"),
    ('[[joint]]\nname = "j"\naxis = [{n}, 0, 0]\n', '[[joint]] "j"', "axis[0]"),
    ('[[joint]]\nname = "j"\npoint = [0, 0, {n}]\n', '[[joint]] "j"', "point[2]"),
    ('[[joint]]\nname = "j"\npitch = {n}\n', '[[joint]] "j"', "pitch"),
    ('[[joint]]\nname = "j"\narmature = [{n}]\n', '[[joint]] "j"', "armature[0]"),
    ('[[joint]]\nname = "j"\nlimits = {{lower = -{n}}}\n', '[[joint]] "j"', "limits.lower"),
    ('[[joint]]\nname = "j"\naxes = [[1, 0, 0], [0, {n}, 0]]\n', '[[joint]] "j"',
     "axes[1][1]"),
    ('[[frame]]\nname = "f"\nrpy = [0, 0, {n}]\n', '[[frame]] "f"', "rpy[2]"),
    ("[[mimic]]\njoint = \"j\"\nmultiplier = {n}\n", "[[mimic]] #0", "multiplier"),
    ("[[mimic]]\njoint = \"j\"\noffset = -{n}\n", "[[mimic]] #0", "offset"),
    ("[model]\ngravity = [0, 0, {n}]\n", "[model]", "gravity[2]"),
]


@pytest.mark.parametrize("text,element,field", TOML_FIELDS)
@pytest.mark.parametrize("digits", [310, 400, 4000])
def test_toml_huge_integers_name_element_and_field(tmp_path, text, element, field, digits):
    p = write(tmp_path, "big.toml", text.format(n="9" * digits))
    raises_named(lambda: td.load(p), str(p), element, f"field '{field}'", "float64 range")


def test_toml_integers_beyond_python_digits_are_a_robot_file_error():
    raises_named(lambda: parse_toml_string("[[body]]\nname = \"a\"\nmass = " + "9" * 5000),
                 "unreadable TOML value")


@pytest.mark.parametrize("call,fragment", [
    (lambda g: g.add_body("c", mass=10 ** 400), "mass"),
    (lambda g: g.add_body("c", mass=1.0, com=[0, 10 ** 400, 0]), "com"),
    (lambda g: g.add_joint("k", "revolute", "a", "b", axis=[0, 0, 1],
                           limits=dict(lower=-10 ** 400)), "limit 'lower'"),
    (lambda g: g.add_joint("k", "helical", "a", "b", axis=[0, 0, 1], pitch=10 ** 400), "pitch"),
    (lambda g: g.add_mimic("k", "j", 10 ** 400), "multiplier"),
])
def test_graph_api_huge_integers_are_model_errors(call, fragment):
    g = td.JointGraph("g")
    g.add_body("a", mass=1.0)
    g.add_body("b", mass=1.0)
    g.add_joint("j", "revolute", "world", "a", axis=[0, 0, 1])
    raises_named(lambda: call(g), fragment, kind=ModelError)


XML_FIELDS = [
    ("urdf", '<robot name="r"><link name="a"><inertial><mass value="{n}"/><inertia ixx="1" '
             'iyy="1" izz="1"/></inertial></link></robot>', "value"),
    ("urdf", '<robot name="r"><link name="a"><inertial><origin xyz="0 {n} 0"/><mass value="1"/>'
             '<inertia ixx="1" iyy="1" izz="1"/></inertial></link></robot>', "xyz"),
    ("urdf", '<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="{n}" '
             'iyy="1" izz="1"/></inertial></link></robot>', "ixx"),
    ("urdf", '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="revolute">'
             '<parent link="a"/><child link="b"/><axis xyz="1 0 0"/><limit lower="-{n}" '
             'upper="1" effort="1" velocity="1"/></joint></robot>', "lower"),
    ("sdf", sdf("<link name='c'><inertial><mass>{n}</mass></inertial></link>"), "mass"),
    ("sdf", sdf("<link name='c'><inertial><inertia><ixx>{n}</ixx></inertia></inertial></link>"),
     "ixx"),
    ("sdf", sdf("<link name='c'><pose>0 0 {n} 0 0 0</pose></link>"), "pose"),
    ("sdf", sdf("<link name='c'/><joint name='j' type='revolute'><parent>base</parent><child>c"
                "</child><axis><xyz>1 0 0</xyz><limit><lower>-{n}</lower></limit></axis></joint>"),
     "lower"),
]


@pytest.mark.parametrize("fmt,text,field", XML_FIELDS)
def test_xml_huge_numbers_name_the_field(tmp_path, fmt, text, field):
    p = write(tmp_path, f"big.{fmt}", text.format(n=BIG))
    raises_named(lambda: td.load(p), str(p), f"field '{field}'", "float64 range")


# ------------------------------------------------------------ save
def test_save_errors_are_robot_file_errors(tmp_path):
    g = td.load_graph(robots.path("two_link_arm.urdf"))
    d = tmp_path / "dir.toml"
    d.mkdir()
    raises_named(lambda: td.save(g, d), str(d), "cannot write file: it is a directory")
    missing = tmp_path / "no" / "such" / "x.toml"
    raises_named(lambda: td.save(g, missing), str(missing), "No such file or directory")
    plain = write(tmp_path, "plain.txt", "x")
    through = plain / "x.toml"
    raises_named(lambda: td.save(g, through), str(through), "Not a directory")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    raises_named(lambda: td.save(g, fifo), "a FIFO (named pipe), not a regular file")
    raises_named(lambda: td.save(g, str(tmp_path / "nul\0.toml")), "cannot write file")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        raises_named(lambda: td.save(g, ro / "x.toml"), "Permission denied")


def test_failed_save_leaves_an_existing_file_untouched(tmp_path):
    p = write(tmp_path, "keep.toml", "original")
    with pytest.raises(InputError):
        td.save(object(), p)
    assert p.read_text() == "original"


ARRAYS = ["A", "B", "X", "Y", "armature", "center", "com", "effort_limit", "frame_body",
          "frame_offset", "gravity", "inertia", "kind", "lower_limit", "mass", "nqj", "nvj",
          "parent", "qoff", "upper_limit", "velocity_limit", "voff", "spatial_inertia"]
NAMES = ["name", "body_names", "joint_names", "joint_types", "frame_names", "free_groups",
         "mimic", "nq", "nv"]


def assert_round_trip(model, tmp_path, **load_kw):
    p = td.save(model, tmp_path / "rt.toml")
    again = td.load(p, **load_kw)
    for key in ARRAYS:
        np.testing.assert_array_equal(getattr(again, key), getattr(model, key), err_msg=key)
    for key in NAMES:
        assert getattr(again, key) == getattr(model, key), key
    assert [c.name for c in again.loop_closures] == [c.name for c in model.loop_closures]
    assert graph_to_dict(again.graph) == graph_to_dict(model.graph)
    # saving the reloaded model writes the same file
    with open(p, "rb") as f1, open(td.save(again, tmp_path / "rt2.toml"), "rb") as f2:
        assert f1.read() == f2.read()
    return again


@pytest.mark.parametrize("name,floating_base", [(n, False) for n in SHIPPED] +
                         [(n, True) for n in SHIPPED if n.endswith(".urdf")])
def test_shipped_robots_round_trip(tmp_path, name, floating_base):
    assert_round_trip(td.load(robots.path(name), floating_base=floating_base), tmp_path)


@pytest.mark.parametrize("name", ["four_bar.toml", "panda.urdf", "delta.sdf"])
def test_absolute_coordinate_models_round_trip(tmp_path, name):
    assert_round_trip(td.load(robots.path(name), coordinates="absolute"), tmp_path)


def box(g, name, mass=1.0, frame=None):
    g.add_body(name, mass=mass, com=[0.01, -0.02, 0.03], inertia=np.diag([0.1, 0.2, 0.25]),
               frame=frame)


def edge_models():
    out = {"empty": td.JointGraph("empty")}
    g = td.JointGraph("fixed only")
    box(g, "a")
    box(g, "b")
    g.add_joint("f1", "fixed", "world", "a")
    g.add_joint("f2", "fixed", "a", "b")
    tip = np.eye(4)
    tip[:3, :3] = lie.rpy_to_rot([0.1, 0.2, 0.3])
    tip[:3, 3] = (0.0, 0.0, 0.5)
    g.add_frame("tip", "b", tip)
    out["fixed only"] = g
    g = td.JointGraph("free bodies", gravity=[0.0, 0.0, 0.0])
    box(g, "a")
    box(g, "b")
    g.add_joint("fa", "free", "world", "a")
    g.add_joint("fb", "free", "world", "b", group="SO3xR3")
    out["free bodies"] = g
    g = td.JointGraph("loop")
    for k, name in enumerate("abc"):
        box(g, name, mass=1.0 + k)
    g.add_joint("j1", "revolute", "world", "a", axis=[0, 0, 1])
    g.add_joint("j2", "revolute", "a", "b", axis=[0, 0, 1], point=[1, 0, 0])
    g.add_joint("j3", "revolute", "b", "c", axis=[0, 0, 1], point=[1, 1, 0])
    g.add_joint("close", "revolute", "c", "world", axis=[0, 0, 1], point=[0, 1, 0], loop=True)
    out["loop"] = g
    g = td.JointGraph("mimic")
    box(g, "a")
    box(g, "b")
    g.add_joint("lead", "revolute", "world", "a", axis=[0, 1, 0],
                limits=dict(lower=-1.0, upper=2.0))
    g.add_joint("follow", "prismatic", "a", "b", axis=[1, 0, 0], armature=0.5)
    g.add_mimic("follow", "lead", -0.25, 0.125)
    out["mimic"] = g
    g = td.JointGraph("all kinds")
    names = ["rev", "pri", "hel", "cyl", "uni", "sph", "pla", "fre"]
    for n in names:
        box(g, n)
    g.add_joint("rev", "revolute", "world", "rev", axis=[0, 0, 1])
    g.add_joint("pri", "prismatic", "rev", "pri", axis=[0.6, 0.8, 0])
    g.add_joint("hel", "helical", "pri", "hel", axis=[1, 0, 0], pitch=-0.01)
    g.add_joint("cyl", "cylindrical", "hel", "cyl", axis=[0, 1, 0])
    g.add_joint("uni", "universal", "cyl", "uni", axes=[[1, 0, 0], [0, 0, 1]])
    g.add_joint("sph", "spherical", "uni", "sph", point=[0, 0, -1])
    g.add_joint("pla", "planar", "sph", "pla", axis=[0, 0, 1], x_axis=[0, 1, 0])
    g.add_joint("fre", "free", "pla", "fre")
    out["all kinds"] = g
    return out


@pytest.mark.parametrize("name", sorted(edge_models()))
@pytest.mark.parametrize("as_graph", [False, True])
def test_edge_models_round_trip(tmp_path, name, as_graph):
    g = edge_models()[name]
    model = g.compile()
    p = td.save(g if as_graph else model, tmp_path / "edge.toml")
    assert_round_trip(model, tmp_path)
    assert td.load(p).nq == model.nq


def test_empty_toml_still_refused_unless_explicitly_empty(tmp_path):
    raises_named(lambda: td.load(write(tmp_path, "e.toml", "")), "no [[body]] and [[joint]]")
    m = td.load(write(tmp_path, "e2.toml", "body = []\njoint = []\n"))
    assert (m.nq, m.nv, m.body_names) == (0, 0, ())


# ============================================================ 4. fuzzing
#: names unique within a scope (the two pools are disjoint), so that every clash of
#: scoped names comes from '::' inside a name meeting a nested model of that name
ELEMENT_NAMES = ["x", "y", "a::x", "b::x", "a::a::x", "a::y", "b::a::x"]
MODEL_NAMES = ["a", "b", "a::a"]


@st.composite
def scoped_models(draw, depth=0):
    """A model body: elements (kind, name, None) and nested models (name, body)."""
    n_models = draw(st.integers(0, 2 if depth < 3 else 0))
    models = draw(st.lists(st.sampled_from(MODEL_NAMES), min_size=n_models,
                           max_size=n_models, unique=True))
    names = draw(st.lists(st.sampled_from(ELEMENT_NAMES), min_size=0 if depth else 1,
                          max_size=3, unique=True))
    items = [(draw(st.sampled_from(["link", "link", "frame"])), n, None) for n in names]
    items += [("model", m, draw(scoped_models(depth + 1))) for m in models]
    return draw(st.permutations(items))


def flatten(items, prefix=""):
    """(kind, scoped name) of every element, models included."""
    out = []
    for kind, name, inner in items:
        out.append((kind, prefix + name))
        if kind == "model":
            out.extend(flatten(inner, prefix + name + "::"))
    return out


def render(items, links):
    text = ""
    for kind, name, inner in items:
        if kind == "model":
            text += f'<model name="{name}">{render(inner, links)}</model>'
        elif kind == "link":
            links.append(None)
            text += f'<link name="{name}">{inertial(len(links))}</link>'
        else:
            text += f'<frame name="{name}"/>'
    return text


def model_has_a_link(items):
    return any(k == "link" or (k == "model" and model_has_a_link(inner))
               for k, _, inner in items)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=scoped_models())
def test_fuzz_sdf_scoping(items):
    """Same scoped name twice (in the same scope or through '::' in names) is an
    error naming it; otherwise every link is a body with its own mass."""
    links = []
    body = render(items, links)
    flat = flatten(items)
    scoped = [n for _, n in flat]
    # the scoped links, in document order of the elements (render order = flatten order)
    link_names = [n for k, n in flat if k == "link"]
    joints = "".join(f'<joint name="j{i}" type="fixed"><parent>world</parent><child>{n}'
                     f'</child></joint>' for i, n in enumerate(link_names))
    text = f'<sdf version="1.7"><model name="m">{body}{joints}</model></sdf>'
    duplicates = sorted({n for n in scoped if scoped.count(n) > 1})
    empty_model = any(k == "model" and not model_has_a_link(inner)
                      for k, _, inner in walk(items))
    try:
        g = parse_sdf_string(text)
    except RobotFileError as exc:
        msg = str(exc)
        if duplicates:
            assert any(f"two elements have the scoped name '{d}'" in msg
                       for d in duplicates), msg
            return
        assert empty_model or not link_names, msg     # a model without a link
        return
    assert not duplicates, (duplicates, text)
    assert {n: g.body(n)["mass"] for n in g.bodies} == {
        n: float(k + 1) for k, n in enumerate(link_names)}


def walk(items):
    for kind, name, inner in items:
        yield kind, name, inner
        if kind == "model":
            yield from walk(inner)


@settings(max_examples=150, deadline=None)
@given(kinds=st.lists(st.sampled_from(["[", "{"]), min_size=1, max_size=60),
       place=st.sampled_from(sorted(PLACES)))
def test_fuzz_toml_nesting(kinds, place):
    """Nesting deeper than the limit is refused by name, at any place and any mix of
    arrays and inline tables; within the limit, never a nesting error or a raw one."""
    template, level = PLACES[place]
    text = template.format(v=nest(len(kinds), kinds))
    try:
        parse_toml_string(text).compile()
    except TreedynError as exc:
        too_deep = level + len(kinds) > MAX_NESTING
        assert ("nested" in str(exc)) == too_deep, (str(exc), level + len(kinds))
    else:                                               # pragma: no cover - never valid
        assert level + len(kinds) <= MAX_NESTING


@settings(max_examples=100, deadline=None)
@given(digits=st.integers(310, 1200), sign=st.sampled_from(["", "-", "+"]),
       field=st.sampled_from(TOML_FIELDS))
def test_fuzz_toml_huge_integers(digits, sign, field):
    text, element, name = field
    number = sign + "1" + "0" * (digits - 1)
    text = text.replace("-{n}", "{n}").format(n=number)
    raises_named(lambda: parse_toml_string(text), element, f"field '{name}'", "float64")


FINITE = st.floats(-10.0, 10.0, allow_nan=False, width=64)
UNIT_DIRS = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0],
             [0.0, -0.28, 0.96]]


@st.composite
def random_graphs(draw):
    """A tree of up to 6 bodies on random joints (with frames, limits, armature, one
    mimic coupling and maybe a loop closure): any graph that compiles."""
    g = td.JointGraph(draw(st.sampled_from(["r", "robot β", 'q"uote'])),
                      gravity=draw(st.tuples(FINITE, FINITE, FINITE)))
    n = draw(st.integers(0, 6))
    one_dof = []
    for k in range(n):
        name = f"b{k}"
        frame = None
        if draw(st.booleans()):
            frame = np.eye(4)
            frame[:3, :3] = lie.rpy_to_rot(draw(st.tuples(FINITE, FINITE, FINITE)))
            frame[:3, 3] = draw(st.tuples(FINITE, FINITE, FINITE))
        d = draw(st.tuples(*[st.floats(0.01, 2.0)] * 3))
        g.add_body(name, mass=draw(st.floats(0.0, 5.0)), com=draw(st.tuples(FINITE, FINITE,
                                                                             FINITE)),
                   inertia=np.diag([d[0] + d[1], d[1] + d[2], d[0] + d[2]]), frame=frame)
        parent = draw(st.sampled_from(["world"] + [f"b{i}" for i in range(k)]))
        t = draw(st.sampled_from(["revolute", "prismatic", "helical", "cylindrical",
                                  "universal", "spherical", "planar", "free", "fixed",
                                  "continuous"]))
        kw = dict(point=draw(st.tuples(FINITE, FINITE, FINITE)))
        axis = draw(st.sampled_from(UNIT_DIRS))
        if t in ("revolute", "prismatic", "helical", "cylindrical", "continuous"):
            kw["axis"] = axis
        if t == "helical":
            kw["pitch"] = draw(FINITE)
        if t == "universal":
            kw["axes"] = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
        if t == "planar":
            kw.update(axis=[0.0, 0.0, 1.0], x_axis=[1.0, 0.0, 0.0])
        if t == "free":
            kw["group"] = draw(st.sampled_from(["SE3", "SO3xR3"]))
        if t in ("revolute", "prismatic") and draw(st.booleans()):
            lo = draw(FINITE)
            kw["limits"] = dict(lower=lo, upper=lo + draw(st.floats(0.0, 3.0)),
                                effort=draw(st.floats(0.0, 100.0)))
        if t in ("revolute", "prismatic") and draw(st.booleans()):
            kw["armature"] = draw(st.floats(0.0, 1.0))
        g.add_joint(f"j{k}", t, parent, name, **kw)
        if t in ("revolute", "prismatic", "helical", "continuous"):
            one_dof.append(f"j{k}")
        if draw(st.booleans()):
            pose = np.eye(4)
            pose[:3, 3] = draw(st.tuples(FINITE, FINITE, FINITE))
            g.add_frame(f"f{k}", name, pose)
    if len(one_dof) >= 2 and draw(st.booleans()):
        g.add_mimic(one_dof[1], one_dof[0], draw(FINITE), draw(FINITE))
    if n >= 2 and draw(st.booleans()):
        g.add_joint("close", "spherical", "b0", f"b{n - 1}", point=[0.0, 0.0, 0.0], loop=True)
    return g


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(g=random_graphs())
def test_fuzz_save_load_round_trip(tmp_path, g):
    """Every graph that compiles is written by save and read back bitwise equal."""
    try:
        model = g.compile()
    except ModelError:
        return                                          # e.g. a massless end body
    assert_round_trip(model, tmp_path)
