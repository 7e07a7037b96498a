"""Headless Chromium for browser tests: Debian's ``chromium`` and ``chromium-driver``, driven by Selenium.

``chromium_unavailable()`` installs the two packages with apt when they are missing (as root; the
first time takes a few minutes) and says why not when that cannot be done. ``headless_chromium(tmp)``
starts a browser with a throw-away profile and quits it afterwards. Selenium is given both paths, so
it never tries to download a driver or a browser of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PACKAGES = ("chromium", "chromium-driver")
INSTALL_TIMEOUT = 900.0
WINDOW = (1440, 1100)
# No network beyond the page under test, no first-run chores, nothing that outlives the test.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
         f"--window-size={WINDOW[0]},{WINDOW[1]}")


def chromium_unavailable() -> str | None:
    """``None`` once Chromium and its driver are installed, else why they cannot be."""
    if _installed():
        return None
    if shutil.which("apt-get") is None:
        return "headless Chromium is not installed and there is no apt-get to install it"
    if os.geteuid() != 0:
        return f"headless Chromium is not installed; as root, apt-get install {' '.join(PACKAGES)}"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        for command in (["apt-get", "update", "-q"],
                        ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", *PACKAGES]):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
            if done.returncode != 0:
                return f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()[-500:]}"
    except subprocess.TimeoutExpired:
        return f"installing {' '.join(PACKAGES)} took over {INSTALL_TIMEOUT:.0f} s"
    return None if _installed() else f"apt-get installed {' '.join(PACKAGES)} but {CHROMEDRIVER} is missing"


def _installed() -> bool:
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


@contextlib.contextmanager
def headless_chromium(profile_dir: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium WebDriver using ``profile_dir`` as its profile; quit on exit."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages: driver.get_log("browser")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        driver.set_page_load_timeout(15)
        yield driver
    finally:
        driver.quit()
