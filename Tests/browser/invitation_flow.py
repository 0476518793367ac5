"""A real browser opens an invitation link, sees the couple's name and the role, and accepts.

Run by scripts/browser-test against a running `rbac serve`; prints a TAP-like line per check (scripts/browser-test counts them).
Usage: invitation_flow.py LINK COUPLE_NAME ROLE USER_ID JWT_SECRET
"""
import base64
import hashlib
import hmac
import json
import sys
import time

from browser import chromium, report
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait


def jwt(user_id: str, secret: str) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64(json.dumps({"sub": user_id, "exp": int(time.time()) + 600}).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def main() -> int:
    link, couple_name, role, user_id, secret = sys.argv[1:6]
    driver = chromium()
    results = []
    try:
        driver.get(link)
        results.append(("the page shows the couple's name", driver.find_element(By.ID, "couple").text == couple_name))
        results.append(("the page shows the role", driver.find_element(By.ID, "role").text == role))
        # The app signs the user in and hands the page its session, as a real app's web view would.
        driver.execute_script("document.getElementById('access_token').value = arguments[0];", jwt(user_id, secret))
        driver.find_element(By.ID, "accept").click()
        # The click submits a form: wait for the answer page rather than reading the old one.
        welcome = WebDriverWait(driver, 20).until(
            expected_conditions.presence_of_element_located((By.ID, "welcome"))).text
        results.append(("accepting shows the welcome", welcome == f"Welcome to {couple_name}"))
    finally:
        driver.quit()
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
