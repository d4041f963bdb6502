"""What the headless-browser tests share: whether Chromium can run here (a skip,
or a failure where `.ci/run` installed it: ``TREEDYN_BROWSER_TEST=required``),
and one wait loop."""
import os
import shutil
import time

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def browser_missing():
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
        import viser  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install treedyn[viewer] selenium)"
    if not CHROMIUM or not DRIVER:
        return "no chromium/chromedriver on PATH (apt-get install chromium chromium-driver)"
    return None


def needs_browser():
    """The skip mark of a browser test; where the browser is required, its absence
    fails the test module instead."""
    reason = browser_missing()
    if reason and os.environ.get("TREEDYN_BROWSER_TEST") == "required":
        raise RuntimeError(f"the browser test cannot run: {reason}")
    return pytest.mark.skipif(reason is not None, reason=f"browser test skipped: {reason}")


def wait_until(cond, seconds, what, poll=0.1):
    """cond()'s first true value within ``seconds``, else an AssertionError naming
    ``what``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        val = cond()
        if val:
            return val
        time.sleep(poll)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")
