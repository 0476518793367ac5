"""What the browser tests share: Debian's headless Chromium, and their TAP-like report."""
from selenium import webdriver


def chromium(*flags: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", *flags):
        options.add_argument(flag)
    # Debian's driver, named explicitly: Selenium Manager would try to download one.
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))


def report(results: list[tuple[str, bool]]) -> int:
    """Prints a line per check (scripts/browser-test counts them); the exit status."""
    for description, passed in results:
        print(f"{'ok' if passed else 'not ok'} - browser: {description}")
    return 1 if any(not passed for _, passed in results) else 0
