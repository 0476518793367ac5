"""A page of the app's own, on another origin, reads an invitation's preview and accepts it from the browser;
the same page on an origin rbac was not told of cannot read the preview.

Run by scripts/browser-test against `rbac serve --cors-origin ALLOWED_ORIGIN`; prints a TAP-like line per check.
Usage: app_page_flow.py API ALLOWED_ORIGIN OTHER_ORIGIN TOKEN OTHER_TOKEN COUPLE_NAME ROLE USER_ID JWT_SECRET
"""
import sys
import urllib.parse

from browser import chromium, report
from invitation_flow import jwt
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def main() -> int:
    api, allowed, other, token, other_token, couple_name, role, user_id, secret = sys.argv[1:10]
    driver = chromium()
    results = []

    def page(origin: str, invitation: str) -> None:
        fragment = urllib.parse.urlencode({"api": api, "token": invitation, "jwt": jwt(user_id, secret)})
        driver.get(f"{origin}/app_page.html#{fragment}")

    def text(element: str) -> str:
        return WebDriverWait(driver, 20).until(lambda d: d.find_element(By.ID, element).text)

    try:
        page(allowed, token)
        preview, accepted = text("preview"), text("accepted")
        results.append((f"the app's page reads the preview and accepts across origins ({preview}, {accepted})",
                        preview == couple_name and accepted == role))
        page(other, other_token)
        blocked = text("preview")
        results.append((f"a page of another origin cannot read the preview ({blocked})", blocked.startswith("blocked")))
    finally:
        driver.quit()
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
