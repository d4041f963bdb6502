"""The viewer in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by .ci/run) driven by selenium (issue #28).

Checks: the page connects (no page error, no WebSocket failure), the robot's
colours appear where the camera looks, another trajectory time changes the
picture, and playback of a 10 s, 1 kHz trajectory renders at a frame rate counted
in the page with requestAnimationFrame.  Screenshots: $TREEDYN_SCREENSHOTS (default
the system temp dir)/treedyn_view_*.png, kept out of git.
"""
import base64
import os
import tempfile
import time

import numpy as np
import pytest

import treedyn as td
from browser_support import CHROMIUM, DRIVER, needs_browser, wait_until

SHOTS = os.environ.get("TREEDYN_SCREENSHOTS", tempfile.gettempdir())
SIZE = (1000, 700)
#: the four-bar's link colours (robots/four_bar.toml), 0-255
LINK_RGB = np.array([[217, 84, 26], [51, 115, 204], [77, 166, 64]])
#: a shape is lit: accept a colour whose direction (hue, saturation) matches
MIN_FPS = 5.0   # generous: software WebGL on 2 shared cores (a stalled page gives < 1)


pytestmark = needs_browser()

HOOKS = """
window.__errors = [];
window.addEventListener('error', e => window.__errors.push('error: ' + e.message));
window.addEventListener('unhandledrejection', e => window.__errors.push('rejection: ' + e.reason));
"""


def _chromium(size):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              f"--window-size={size[0]},{size[1]}", "--use-angle=swiftshader",
              "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist", "--mute-audio"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(DRIVER), options=opts)
    d.set_script_timeout(60)
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOKS})
    return d


@pytest.fixture(scope="module")
def browser():
    d = _chromium(SIZE)
    yield d
    d.quit()


@pytest.fixture
def small_browser():
    """640×480 (a video's size): software WebGL's cost grows with the pixels."""
    d = _chromium((640, 480))
    yield d
    d.quit()


def _logs(d, seen):
    seen.extend(d.get_log("browser"))
    return seen


def _open(d, url, logs):
    d.get("about:blank")
    d.get_log("browser")                          # drain the previous page's messages
    d.get(url)


def _assert_healthy(d, logs):
    """No page error, no failed or closed WebSocket, no error in the console (while
    the page is open: leaving it closes the socket with code 1001)."""
    _logs(d, logs)
    errors = d.execute_script("return window.__errors")
    assert not errors, errors
    bad = [e["message"] for e in logs if e["level"] == "SEVERE"
           or ("websocket" in e["message"].lower() and "fail" in e["message"].lower())
           or "Disconnected" in e["message"] or "Connection closed" in e["message"]]
    assert not bad, bad
    assert any("Connected!" in e["message"] for e in logs), [e["message"] for e in logs]


def _shot(d, name):
    from PIL import Image
    path = os.path.join(SHOTS, f"treedyn_view_{name}.png")
    shot = d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png",
                                                        "optimizeForSpeed": True})
    with open(path, "wb") as fh:
        fh.write(base64.b64decode(shot["data"]))
    return path, np.asarray(Image.open(path).convert("RGB")).astype(float)


def _centre(img):
    """Where the camera looks: the middle of the canvas, clear of the GUI panel (320 px
    at the right) and of the notification at the top left."""
    h, w = img.shape[:2]
    return img[max(int(0.3 * h), 160):int(0.85 * h), int(0.2 * w):w - 350]


def _robot_pixels(img):
    """Pixels whose chromaticity is that of one of the link colours (lighting scales a
    colour; white background and grey GUI have none of it)."""
    px = img.reshape(-1, 3)
    sat = px.max(axis=1) - px.min(axis=1)
    unit = px / np.maximum(np.linalg.norm(px, axis=1, keepdims=True), 1)
    ref = LINK_RGB / np.linalg.norm(LINK_RGB, axis=1, keepdims=True)
    close = (unit @ ref.T).max(axis=1) > 0.995
    return int(np.count_nonzero(close & (sat > 40)))


@pytest.fixture(scope="module")
def four_bar_run():
    m = td.load(td.robots.path("four_bar.toml"))
    q0 = m.assemble(m.neutral())
    v0 = m.project_velocity(q0, np.array([6.0, 0.0, 0.0]))
    return m, td.simulate(m, q0, v0, t_final=10.0, dt=1e-3)        # 10 s at 1 kHz


def test_robot_drawn_moves_with_time_and_no_errors(browser, four_bar_run):
    m, tr = four_bar_run
    assert len(tr.t) == 10001
    v = td.view(m, tr)
    logs = []
    try:
        tick = time.monotonic()
        _open(browser, v.url, logs)
        wait_until(lambda: any("Connected!" in e["message"] for e in _logs(browser, logs)), 60,
              "the WebSocket connection")
        wait_until(lambda: _robot_pixels(_centre(_shot(browser, "four_bar_t0")[1])) > 200, 60,
              "the robot's colours in the middle of the picture")
        first = time.monotonic() - tick
        path0, img0 = _shot(browser, "four_bar_t0")
        n0 = _robot_pixels(_centre(img0))
        assert n0 > 200, (path0, n0)
        # another time: the picture changes where the robot is
        k = int(np.searchsorted(tr.t, 0.25))
        v.show(k)
        v._time.value = float(tr.t[k])

        def changed():
            _, img = _shot(browser, "four_bar_t025")
            diff = np.abs(_centre(img) - _centre(img0)).max(axis=2)
            return np.count_nonzero(diff > 30) > 200
        wait_until(changed, 60, "the picture to change after moving the time")
        _assert_healthy(browser, logs)
        print(f"first frame in the browser after {first:.2f} s; screenshots in {SHOTS}")
    finally:
        browser.get("about:blank")
        v.close()


def test_playback_frame_rate_counted_by_the_client(small_browser, four_bar_run):
    browser = small_browser
    m, tr = four_bar_run
    v = td.view(m, tr)
    logs = []
    try:
        _open(browser, v.url, logs)
        # drawing starts once the client has built the scene: wait for the robot (left of
        # the GUI panel, which covers the right 340 px)
        wait_until(lambda: _robot_pixels(_shot(browser, "four_bar_small")[1][160:, :-340]) > 100, 60,
              "the first frame")
        v.play(speed=1.0)
        k0 = v._k
        fps = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            let n = 0; const t0 = performance.now();
            function tick(now) { n++; if (now - t0 < 2000) requestAnimationFrame(tick);
                                 else done(1000 * n / (now - t0)); }
            requestAnimationFrame(tick);""")
        moved = v._k - k0
        v.play(False)
        _assert_healthy(browser, logs)
        print(f"playback at 640×480: {fps:.1f} frames/s counted by requestAnimationFrame; "
              f"{moved} trajectory rows advanced in 2 s")
        assert fps >= MIN_FPS
        assert moved > 500                 # ~2000 rows at speed 1 (decimated to the display)
    finally:
        browser.get("about:blank")
        v.close()
