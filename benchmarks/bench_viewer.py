"""The viewer's figures: first frame of talos, playback frame rate, Cassie video.

    python benchmarks/bench_viewer.py [--quick] [--runs K] [--timeline] [--full-meshes]

* first frame: ``treedyn view talos_full_v2.urdf`` (example-robot-data, with its
  meshes) started as a user would; headless Chromium (Debian's ``chromium`` and
  ``chromium-driver``, driven by selenium) opens the printed URL at once (the
  URL is printed before the meshes are read: the client loads meanwhile), and an
  in-page probe (PROBE) reads the WebGL canvas, as shown (its CSS opacity applied),
  after each redraw until the robot's meshes appear.  Printed: seconds from the command's start to the URL
  and to that first frame (target ≤ 3 s), median of K runs (default 3).  The meshes are
  drawn at the viewer's default detail (half their triangles); ``--full-meshes`` passes
  that flag to ``treedyn view``.  ``--timeline``: for each run, where the client's time
  went after navigation (TIMELINE: the page loaded, the WebGL context created and how
  long that took, the shader programs linked, each frame drawn with its draw calls and
  triangles).
* playback: a 10 s, 1 kHz trajectory of the four-bar playing at speed 1, frames
  counted by the client with ``requestAnimationFrame`` for 3 s, at 640×480 and
  1000×700 (target ≥ 30 frames/s).
* video: ``td.animate`` of Cassie (examples/cassie.py), 5 s at 30 fps (target ≤ 20 s).

The browser renders WebGL in software (SwiftShader) on machines without a GPU:
the figures depend on the machine as much as on treedyn.  ``--quick``: one run,
1 s of counting, a 1 s video.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, HERE)
from common import aligned_cassie  # noqa: E402
from oracles import erd_path  # noqa: E402

#: The first frame with the robot's meshes, as the user sees it: the WebGL canvas
#: (kept readable) scaled to 80×60, composited over the white page with the
#: canvas's effective CSS opacity (viser's client dims the canvas to 5 % while it
#: loads an environment map, then fades it in: a frame drawn under that veil is
#: not seen), its middle 40×33 (where the camera looks) counted for opaque grey
#: pixels, neither the white background (max channel ≥ 215) nor coloured
#: (channel spread ≥ 40).  talos's meshes are grey and black; the stick figure
#: (orange), COM spheres (blue), joint axes (red) and an empty scene do not count,
#: so neither a loading page, a dimmed canvas nor a scene without its meshes
#: passes (tests/test_viewer_startup.py and test_viewer_lighting.py check these).
#: Reading a WebGL canvas back waits for the (software) GPU, so the probe reads it
#: only on animation frames after a draw call or an opacity change: a canvas that
#: was neither redrawn nor restyled looks as it did.
PROBE = """
const gc = HTMLCanvasElement.prototype.getContext;
HTMLCanvasElement.prototype.getContext = function(type, attrs) {
  if (type && type.startsWith('webgl'))
    attrs = Object.assign({}, attrs || {}, {preserveDrawingBuffer: true});
  return gc.call(this, type, attrs); };
let drawn = 0, seen = -1, lastOp = -1;
for (const P of [WebGLRenderingContext.prototype, WebGL2RenderingContext.prototype])
  for (const f of ['drawArrays', 'drawElements', 'drawArraysInstanced', 'drawElementsInstanced',
                   'drawRangeElements'])
    if (P[f]) { const o = P[f]; P[f] = function() { drawn++; return o.apply(this, arguments); }; }
window.__first = null;
const probe = document.createElement('canvas'); probe.width = 80; probe.height = 60;
function opacity(el) {
  let op = 1;
  for (; el && el.nodeType === 1; el = el.parentElement) op *= parseFloat(getComputedStyle(el).opacity);
  return op; }
function check(now) {
  const c = [...document.querySelectorAll('canvas')].find(x => x !== probe && x.width > 200);
  const op = c ? opacity(c) : 0;
  if (c && (drawn !== seen || op !== lastOp)) { seen = drawn; lastOp = op;
    const g = probe.getContext('2d', {willReadFrequently: true});
    g.clearRect(0, 0, 80, 60); g.drawImage(c, 0, 0, 80, 60);
    const p = g.getImageData(16, 18, 40, 33).data; let n = 0;
    for (let i = 0; i < p.length; i += 4) {
      const a = op * p[i + 3] / 255, v = [0, 1, 2].map(j => a * p[i + j] + (1 - a) * 255);
      const hi = Math.max(...v), lo = Math.min(...v);
      if (hi < 215 && hi - lo < 40) n++; }
    if (n > 40) { window.__first = now; return; } }
  requestAnimationFrame(check); }
requestAnimationFrame(check);
"""

#: Where the client's time goes after navigation (``--timeline``), logged in the page
#: as [ms since navigation, what, detail]: WebGL contexts (creation time), shader
#: programs linked (the wait for the link, on the first query of the program), and
#: each animation frame that drew something (draw calls, triangles).
TIMELINE = """
window.__tl = []; const T = (what, x) => window.__tl.push([performance.now() | 0, what, x]);
document.addEventListener('DOMContentLoaded', () => T('page loaded'));
const gc2 = HTMLCanvasElement.prototype.getContext;
HTMLCanvasElement.prototype.getContext = function(type, attrs) {
  const t = performance.now(), r = gc2.call(this, type, attrs);
  if (type && type.startsWith('webgl') && this.width > 200) T('WebGL context', (performance.now() - t) | 0);
  return r; };
let calls = 0, tris = 0, linked = 0, waited = 0;
for (const P of [WebGLRenderingContext.prototype, WebGL2RenderingContext.prototype]) {
  for (const f of ['drawArrays', 'drawElements', 'drawArraysInstanced', 'drawElementsInstanced'])
    if (P[f]) { const o = P[f]; P[f] = function() { calls++;
      tris += (f.startsWith('drawElements') ? arguments[1] : arguments[2]) / 3 * (arguments[4] || 1);
      return o.apply(this, arguments); }; }
  const lp = P.linkProgram; P.linkProgram = function() { linked++; return lp.apply(this, arguments); };
  for (const f of ['getProgramParameter', 'getProgramInfoLog', 'getShaderInfoLog']) {
    const o = P[f]; P[f] = function() { const t = performance.now(), r = o.apply(this, arguments);
      waited += performance.now() - t; return r; }; } }
function tlTick() { if (calls) { T('frame', [calls, tris | 0, linked, waited | 0]); calls = tris = 0; }
  requestAnimationFrame(tlTick); }
requestAnimationFrame(tlTick);
"""

COUNT = """const done = arguments[arguments.length - 1]; let n = 0; const t0 = performance.now();
function tick(now) { n++; if (now - t0 < %d) requestAnimationFrame(tick);
                     else done(1000 * n / (now - t0)); }
requestAnimationFrame(tick);"""


def browser(size):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              f"--window-size={size[0]},{size[1]}", "--use-angle=swiftshader",
              "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_script_timeout(60)
    return d


def first_frame(robot, args=(), timeline=False):
    """(seconds to the URL, seconds to the first frame with the robot), both from
    the start of ``treedyn view`` (with ``args``); with ``timeline``, the client's
    timeline as well (TIMELINE)."""
    d = browser((800, 600))
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                          {"source": (TIMELINE if timeline else "") + PROBE})
        d.get("about:blank")
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "treedyn.cli", "view", robot,
                              "--seconds", "60", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        try:
            url = p.stdout.readline().split(" at ")[1].split()[0]
            t_url = time.monotonic() - t0
            d.get(url)
            while d.execute_script("return window.__first") is None:
                if time.monotonic() - t0 > 50:
                    raise RuntimeError("no frame with the robot within 50 s")
                time.sleep(0.02)
            t_first = time.monotonic() - t0
            if timeline:
                return t_url, t_first, _timeline(d)
            return t_url, t_first
        finally:
            p.terminate()
            p.wait()
    finally:
        d.quit()


def _timeline(d):
    """The client's timeline, one line: ms after navigation of each step."""
    first = d.execute_script("return window.__first")
    out, frames = [], 0
    for ms, what, x in d.execute_script("return window.__tl"):
        if what == "frame":
            frames += 1
            if frames > 4:
                continue
            calls, tris, linked, waited = x
            what = f"frame {calls} draws {tris / 1000:.0f}k tri ({linked} programs, {waited} ms link waits)"
        elif what == "WebGL context":
            what = f"WebGL context ({x} ms)"
        out.append(f"{ms} {what}")
    return "; ".join(out) + f"; probe: meshes seen at {first:.0f}"


def playback_fps(size, seconds):
    import treedyn as td
    m = td.load(td.robots.path("four_bar.toml"))
    q0 = m.assemble(m.neutral())
    traj = td.simulate(m, q0, m.project_velocity(q0, np.array([6.0, 0, 0])), t_final=10.0,
                       dt=1e-3, progress=False)
    d = browser(size)
    v = td.view(m, traj)
    try:
        d.get(v.url)
        time.sleep(5)                              # the client connects and draws
        v.play(speed=1.0)
        return d.execute_async_script(COUNT % int(1000 * seconds))
    finally:
        v.close()
        d.quit()


def cassie_video(duration):
    import treedyn as td
    model, q0 = aligned_cassie()
    v = np.zeros(model.nv)
    v[6:] = 0.5 * np.random.default_rng(1).standard_normal(model.nv - 6)
    traj = td.simulate(model, q0, model.project_velocity(q0, v), duration, 1e-3,
                       gravity=[0, 0, 0], passive=False, progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        tick = time.perf_counter()
        info = td.animate(model, traj, os.path.join(tmp, "cassie.mp4"), fps=30, follow="pelvis")
        return time.perf_counter() - tick, info["frames"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run, short counts, a 1 s video")
    ap.add_argument("--runs", type=int, default=None, help="first-frame runs (default 3)")
    ap.add_argument("--timeline", action="store_true",
                    help="print where the client's time went in each first-frame run")
    ap.add_argument("--full-meshes", action="store_true",
                    help="treedyn view --full-meshes (the meshes as read)")
    a = ap.parse_args(argv)
    runs = a.runs or (1 if a.quick else 3)
    warnings.simplefilter("ignore")
    import platform
    print(f"# bench_viewer ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f})\n")
    talos = erd_path("talos_full_v2")
    view_args = ["--full-meshes"] if a.full_meshes else []
    ff = [first_frame(talos, view_args, a.timeline) for _ in range(runs)]
    urls, firsts = [x[0] for x in ff], [x[1] for x in ff]
    if a.timeline:
        for k, x in enumerate(ff):
            print(f"run {k + 1}: URL {x[0]:.2f} s, first frame {x[1]:.2f} s; after navigation (ms): "
                  f"{x[2]}")
    print(f"talos_full_v2 with meshes{' (full)' if a.full_meshes else ''}: URL after {statistics.median(urls):.2f} s, first frame "
          f"with the robot after {statistics.median(firsts):.2f} s (median of {runs}; runs "
          f"{', '.join(f'{f:.2f}' for f in firsts)}; target <= 3 s)")
    for size in ((640, 480), (1000, 700)):
        fps = playback_fps(size, 1.0 if a.quick else 3.0)
        print(f"four-bar playback, 10 s at 1 kHz, {size[0]}x{size[1]}: {fps:.1f} frames/s "
              f"(target >= 30)")
    seconds, frames = cassie_video(1.0 if a.quick else 5.0)
    print(f"Cassie video: {frames} frames ({frames / 30:.0f} s at 30 fps) in {seconds:.1f} s "
          f"(target for 5 s: <= 20 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
