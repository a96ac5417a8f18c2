"""Headless Chromium for the page tests: Debian's chromium and chromium-driver (``.ci/run`` installs both),
or a skip saying what is missing."""
import contextlib
import shutil

import pytest


@contextlib.contextmanager
def chromium(width: int, height: int = 1800):
    """A Selenium driver of headless Chromium at ``width`` x ``height`` CSS pixels, browser log kept."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not browser or not driver_path:
        pytest.skip("headless Chromium is not installed here (Debian packages chromium and chromium-driver; "
                    ".ci/run installs them when it runs as root with the Debian archive reachable)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def fits(driver) -> tuple:
    """(document scrollWidth, window innerWidth): the page fits when the first is at most the second."""
    return driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
