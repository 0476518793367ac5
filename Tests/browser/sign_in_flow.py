"""A real browser signs in at a real OpenID provider from the invitation page, and comes back accepted.

Run by scripts/browser-test against a running `rbac serve --oidc-issuer ...` and Tests/tools/oidc_provider.py;
prints a TAP-like line per check (scripts/browser-test counts them).
Usage: sign_in_flow.py LINK SECOND_LINK COUPLE_NAME ROLE SUBJECT
"""
import sys
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from browser import chromium, report
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait


def main() -> int:
    link, second_link, couple_name, role, subject = sys.argv[1:6]
    # The provider's certificate comes from the test's own CA, which rbac trusts through --ca-file; the browser
    # is told to go on, as a person would on a provider with a public certificate.
    driver = chromium("--ignore-certificate-errors")
    wait = WebDriverWait(driver, 20)
    results = []
    try:
        driver.get(link)
        results.append(("sign-in: the page shows the couple", driver.find_element(By.ID, "couple").text == couple_name))
        expires = driver.find_element(By.ID, "expires").text
        results.append(("sign-in: the expiry is in words", " UTC" in expires and "T" not in expires.split(" at ")[0]))
        driver.find_element(By.ID, "sign-in").click()
        # At the provider: sign in as the predefined user.
        wait.until(expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, f"button[name='sub'][value='{subject}']"))).click()
        welcome = wait.until(expected_conditions.presence_of_element_located((By.ID, "welcome"))).text
        results.append(("sign-in: back from the provider, accepted", welcome == f"Welcome to {couple_name}"))
        results.append(("sign-in: the page links to the app",
                        driver.find_element(By.ID, "app").get_attribute("href").startswith("https://app.test")))
        driver.refresh()
        results.append(("sign-in: reloading the callback accepts nothing more",
                        not driver.find_elements(By.ID, "welcome")
                        and "already used" in driver.find_element(By.TAG_NAME, "body").text))

        # A callback whose state was tampered with: the provider sends back what it was given.
        driver.get(second_link)
        driver.find_element(By.ID, "sign-in").click()
        wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "button[name='sub']")))
        parts = urlsplit(driver.current_url)
        query = [(k, v + "x" if k == "state" else v) for k, v in parse_qsl(parts.query)]
        driver.get(urlunsplit(parts._replace(query=urlencode(query))))
        wait.until(expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, f"button[name='sub'][value='{subject}']"))).click()
        wait.until(lambda d: urlsplit(d.current_url).path == "/oidc/callback")
        body = driver.find_element(By.TAG_NAME, "body").text
        results.append(("sign-in: a tampered state is refused",
                        not driver.find_elements(By.ID, "welcome") and "does not match" in body))
        driver.get(second_link)
        results.append(("sign-in: and the invitation is still pending", bool(driver.find_elements(By.ID, "sign-in"))))
    except Exception:
        # Where the browser got stuck, for the log.
        print(f"browser at {driver.current_url}: {driver.find_element(By.TAG_NAME, 'body').text[:500]}",
              file=sys.stderr)
        raise
    finally:
        driver.quit()
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
