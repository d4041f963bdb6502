"""The viewer's lighting and the honesty of the first-frame probe (issue #28, first
frame of talos within 3 s).

viser's client lights the scene with its built-in environment map unless told
otherwise, and keeps the canvas at 5 % opacity until that map is decoded and
pre-filtered (seconds in software WebGL): the robot is drawn but not seen.
``view`` sends a hemisphere light and no map by default, shadows off;
``environment=`` / ``--environment`` and ``shadows=`` / ``--shadows`` bring them
back.

Oracles: the messages the server keeps for every client (what a client connecting
now receives), the preset's file bytes, and in headless Chromium a canvas dimmed
by CSS, which the benchmark's probe must not count as seen."""
import io
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import treedyn as td
import treedyn.viewer as tv
from treedyn.cli import main
from treedyn.errors import InputError
from browser_support import needs_browser, wait_until

viser = pytest.importorskip("viser")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HDRI = Path(viser.__file__).parent / "_assets" / "hdri"


def _kept(v):
    """{message type: [messages]} the server keeps for clients (the scene's state)."""
    buf = v._server._websock_server.get_message_buffer()
    out = {}
    for m in list(buf.message_from_id.values()):
        out.setdefault(type(m).__name__, []).append(m)
    return out


@pytest.fixture(scope="module")
def four_bar():
    return td.load(td.robots.path("four_bar.toml"))


def test_default_lighting_is_a_hemisphere_light_without_map_or_shadows(four_bar):
    with td.view(four_bar) as v:
        kept = _kept(v)
    env, = kept["EnvironmentMapMessage"]
    assert env.hdri_data is None                  # the client's default map is replaced
    lights, = kept["EnableLightsMessage"]
    assert lights.enabled and not lights.cast_shadow
    hemi, = kept["HemisphereLightMessage"]
    sky, ground, intensity = tv.HEMISPHERE
    assert tuple(hemi.props.sky_color) == sky and tuple(hemi.props.ground_color) == ground
    assert hemi.props.intensity == intensity


@pytest.mark.parametrize("preset, shadows", [("city", True), ("studio", False),
                                             ("warehouse", True)])
def test_environment_and_shadows_options(four_bar, preset, shadows):
    with td.view(four_bar, environment=preset, shadows=shadows) as v:
        kept = _kept(v)
    env, = kept["EnvironmentMapMessage"]
    files = {p.name: p.read_bytes() for p in HDRI.glob("*.jpg")}
    assert env.hdri_data[:2] == b"\xff\xd8"        # a JPEG: one of viser's preset files
    assert env.hdri_data in files.values()
    others = [viser._scene_api._HDRI_FILENAMES[p] for p in tv.ENVIRONMENTS if p != preset]
    assert all(env.hdri_data != files[f] for f in others)
    lights, = kept["EnableLightsMessage"]
    assert lights.enabled and lights.cast_shadow is shadows
    assert "HemisphereLightMessage" not in kept   # the map lights the scene instead


def test_presets_are_viser_s():
    assert set(tv.ENVIRONMENTS) == set(viser._scene_api._HDRI_FILENAMES)


@pytest.mark.parametrize("kw, words", [({"environment": "mars"}, ["environment", "mars",
                                                                  "studio"]),
                                       ({"environment": ""}, ["environment"]),
                                       ({"environment": True}, ["environment"]),
                                       ({"environment": ["city"]}, ["environment"]),
                                       ({"environment": np.array(["city", "dawn"])},
                                        ["environment"]),
                                       ({"shadows": "yes"}, ["shadows", "yes"]),
                                       ({"shadows": 1}, ["shadows"])])
def test_bad_lighting_arguments(four_bar, kw, words):
    with pytest.raises(InputError) as exc:
        td.view(four_bar, **kw)
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_view_command_lighting_options(monkeypatch):
    seen = []
    real = tv.view

    def spy(*a, **kw):
        v = real(*a, **kw)
        seen.append((kw["environment"], kw["shadows"], _kept(v)))
        return v

    monkeypatch.setattr(tv, "view", spy)
    out = io.StringIO()
    assert main(["view", "four_bar", "--seconds", "0"], out=out) == 0
    assert main(["view", "four_bar", "--environment", "night", "--shadows", "--seconds", "0"],
                out=out) == 0
    (e0, s0, k0), (e1, s1, k1) = seen
    assert (e0, s0) == (None, False) and k0["EnvironmentMapMessage"][0].hdri_data is None
    assert (e1, s1) == ("night", True)
    assert k1["EnvironmentMapMessage"][0].hdri_data == (HDRI / "dikhololo_night_1k.jpg").read_bytes()
    assert k1["EnableLightsMessage"][0].cast_shadow is True
    with pytest.raises(SystemExit) as exc:
        main(["view", "four_bar", "--environment", "mars", "--seconds", "0"], out=out)
    assert exc.value.code == 2


# ------------------------------------------------------------------ in Chromium
@needs_browser()
def test_probe_does_not_count_a_dimmed_canvas(tmp_path):
    """The meshes are drawn on a canvas kept at 5 % opacity (as viser's client
    does while it loads an environment map): drawn, not seen, so the probe stays
    silent; once the canvas is opaque the probe fires."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        from bench_viewer import PROBE, browser
        from test_viewer_startup import _robot
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    grey_drawn = """return (() => {
      const c = [...document.querySelectorAll('canvas')].find(x => x.width > 200);
      if (!c) return 0;
      const g = document.createElement('canvas'); g.width = 80; g.height = 60;
      const x = g.getContext('2d'); x.drawImage(c, 0, 0, 80, 60);
      const p = x.getImageData(16, 18, 40, 33).data; let n = 0;
      for (let i = 0; i < p.length; i += 4) {
        const hi = Math.max(p[i], p[i+1], p[i+2]), lo = Math.min(p[i], p[i+1], p[i+2]);
        if (p[i + 3] > 200 && hi < 215 && hi - lo < 40) n++; }
      return n; })()"""
    # the client's page replaces the document it starts in: the veil is (re)inserted
    # on every animation frame, before the probe looks, until lifted
    veil = """window.__unveil = false;
      (function veil() {
        if (window.__unveil) return;
        if (!document.getElementById('veil') && document.documentElement) {
          const s = document.createElement('style'); s.id = 'veil';
          s.textContent = 'canvas { opacity: 0.05 !important; }';
          (document.head || document.documentElement).appendChild(s); }
        requestAnimationFrame(veil); })();
"""
    opacity = """return [...document.querySelectorAll('canvas')].filter(x => x.width > 200)
                   .map(x => parseFloat(getComputedStyle(x).opacity))"""
    m = td.load(_robot(tmp_path))
    d = browser((800, 600))
    d.set_page_load_timeout(60)

    v = td.view(m)
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": veil + PROBE})
        d.get(v.url)
        wait_until(lambda: d.execute_script(grey_drawn) > 40, 60, "the meshes to be drawn")
        time.sleep(0.5)
        assert d.execute_script(opacity) == [pytest.approx(0.05)]
        assert d.execute_script("return window.__first") is None
        d.execute_script("window.__unveil = true; document.getElementById('veil').remove()")
        wait_until(lambda: d.execute_script("return window.__first") is not None, 30,
             "the probe to see the meshes")
    finally:
        v.close()
        d.quit()
