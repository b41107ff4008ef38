"""Drives the web UI's people panels in headless Chromium, as the owner and as a person.

Usage: web_ui_people.py --url http://127.0.0.1:PORT --owner-token T --user-token sqb_… --user bob
                        --approval-id ID --screenshots DIR

As the owner (the gateway token): the Users panel lists `owner` and the person, the
Approvals panel lists the pending request ID and its Approve button settles it, the
Usage panel draws its SVG chart and lists the owner and the person, the Audit panel
lists the request and the decision and Verify reports the chain intact. As the person
(their `sqb_` token): the Users, Approvals and Audit panels are neither offered nor
shown, the Usage panel is and shows only their own usage. Neither browser logs a console
error. Exits 0 when every check passes; otherwise prints what failed and exits 1,
leaving `failure-<who>.png` and that browser's console in DIR. Reuses web_ui.py's
helpers (the same Selenium setup).
"""

import argparse
import pathlib
import re
import sys

sys.dont_write_bytecode = True  # importing web_ui must leave no __pycache__ in the source tree

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from web_ui import CHROMIUM_FLAGS, Browser, CheckFailed, check, check_logged_in, console_errors, log_in  # noqa: E402
from web_ui_axe import check_axe  # noqa: E402

ADMIN_PANELS = ("users", "approvals", "audit")

# Each table is read in one script call: the approvals panel re-renders every 5 s, so
# elements found one by one could go stale between reads.
USERS_SCRIPT = """
return Array.from(document.querySelectorAll('#users-rows [data-testid="user-row"]')).map((row) => ({
  id: row.dataset.id, disabled: row.dataset.disabled,
  cells: Array.from(row.querySelectorAll('td')).map((cell) => cell.textContent),
}));
"""

APPROVALS_SCRIPT = """
return Array.from(document.querySelectorAll('#approvals-list [data-testid="approval"]')).map((card) => ({
  id: card.dataset.id, text: card.textContent,
  tool: card.querySelector('strong').textContent,
  arguments: card.querySelector('.arguments').textContent,
  approve: Boolean(card.querySelector('[data-testid="approval-approve"]')),
  deny: Boolean(card.querySelector('[data-testid="approval-deny"]')),
}));
"""

USAGE_SCRIPT = """
const chart = document.querySelector('#usage-chart svg');
const keys = (id) => Array.from(document.querySelectorAll('#' + id + ' tr[data-key]')).map((row) => row.dataset.key);
return {
  chart: Boolean(chart), label: chart ? chart.getAttribute('aria-label') : null,
  bars: chart ? Array.from(chart.querySelectorAll('rect.bar')).map((bar) => ({
    day: bar.dataset.day, tokens: Number(bar.dataset.tokens), height: Number(bar.getAttribute('height')),
  })) : [],
  users: keys('usage-users'), models: keys('usage-models'), days: keys('usage-days'),
  modelBars: Array.from(document.querySelectorAll('#usage-model-chart li[data-key]')).map((bar) => bar.dataset.key),
  scope: document.getElementById('usage-scope').textContent,
  total: document.getElementById('usage-total').textContent,
};
"""

AUDIT_SCRIPT = """
return Array.from(document.querySelectorAll('#audit-rows [data-testid="audit-row"]')).map((row) => {
  const cells = Array.from(row.querySelectorAll('td')).map((cell) => cell.textContent);
  return { seq: Number(row.dataset.seq), ok: row.dataset.ok, kind: cells[2], actor: cells[3], subject: cells[4],
           detail: cells[6] };
});
"""


def rows(browser, script):
    return browser.driver.execute_script(script)


def log_in_with(browser, url, token):
    browser.driver.get(url)
    browser.wait_visible("login-view")
    log_in(browser, "token", token)
    check_logged_in(browser)


def nav_shown(browser, panel):
    return browser.element(f"nav-{panel}").is_displayed()


def check_owner_nav(browser):
    whoami = browser.wait_visible("whoami").text
    check(whoami == "owner", f"the owner is shown as {whoami!r}")
    for panel in ("usage", *ADMIN_PANELS):
        check(nav_shown(browser, panel), f"the owner is not offered the {panel} panel")
    print(f"ok: the owner is {whoami!r} and offered usage, users, approvals and audit")


def check_users(browser, user):
    browser.open_panel("users")
    listed = rows(browser, USERS_SCRIPT)
    ids = [row["id"] for row in listed]
    check("owner" in ids and user in ids, f"the Users panel lists {ids}, expected owner and {user}")
    person = next(row for row in listed if row["id"] == user)
    check(person["cells"][2] == "user", f"{user}'s role shows as {person['cells'][2]!r}")
    check(person["cells"][3] == f"user:{user}", f"{user}'s context shows as {person['cells'][3]!r}")
    check(person["cells"][5].startswith("set "), f"{user}'s gateway token shows as {person['cells'][5]!r}")
    check(person["disabled"] == "false", f"{user} shows as disabled")
    owner = next(row for row in listed if row["id"] == "owner")
    check(owner["cells"][2] == "admin", f"the owner's role shows as {owner['cells'][2]!r}")
    print(f"ok: users listed: {ids}")
    browser.screenshot("01-owner-users.png")


def check_approvals(browser, user, approval_id):
    browser.open_panel("approvals")
    cards = rows(browser, APPROVALS_SCRIPT)
    card = next((card for card in cards if card["id"] == approval_id), None)
    check(card, f"the Approvals panel does not list request {approval_id}: {[card['id'] for card in cards]}")
    check(card["tool"] == "exec", f"request {approval_id} is for {card['tool']!r}, expected exec")
    check(f"{user} (user) asks in" in card["text"], f"request {approval_id} does not name {user}: {card['text']!r}")
    check("approved-in-the-browser" in card["arguments"], f"request {approval_id} shows {card['arguments']!r}")
    check(card["approve"] and card["deny"], f"request {approval_id} lacks Approve or Deny")
    count = browser.element("approvals-count")
    check(count.is_displayed() and count.text == str(len(cards)), f"the pending badge shows {count.text!r}")
    print(f"ok: request {approval_id} waits: {card['tool']} {card['arguments']}")
    browser.screenshot("02-owner-approvals.png")

    selector = f'#approvals-list [data-id="{approval_id}"] [data-testid="approval-approve"]'
    # A stale element (the 5 s poll re-rendered the cards) is retried by `wait`.
    browser.wait(f"{selector} to be clicked", lambda d: d.find_element(By.CSS_SELECTOR, selector).click() or True)
    message = browser.wait_visible("approvals-message").text
    check(message == f"Approved request {approval_id}.", f"approving shows {message!r}")
    check(not browser.element("approvals-error").is_displayed(), browser.element("approvals-error").text)
    browser.wait(
        f"request {approval_id} to leave the pending list",
        lambda d: all(card["id"] != approval_id for card in rows(browser, APPROVALS_SCRIPT)),
    )
    browser.wait("the pending badge to hide", lambda d: not browser.element("approvals-count").is_displayed())
    print(f"ok: {message}")


def read_usage(browser, user):
    """Opens the Usage panel, refreshing until `user` has usage; what it shows."""
    browser.open_panel("usage")

    def listed(_):
        usage = rows(browser, USAGE_SCRIPT)
        if user in usage["users"]:
            return usage
        browser.click("usage-refresh")
        browser.wait_state("panel-usage", ("loaded", "error"))
        return None

    usage = browser.wait(f"the Usage panel to list {user}", listed)
    check(browser.state("panel-usage") == "loaded", f"usage failed: {browser.error_text('usage')}")
    check(usage["chart"], "the Usage panel has no SVG chart")
    check(usage["label"] == "tokens per day", f"the chart is labelled {usage['label']!r}")
    bars = usage["bars"]
    check(len(bars) == 30, f"the chart has {len(bars)} bars, expected one per day of the last 30")
    busy = [bar for bar in bars if bar["tokens"] > 0]
    check(busy, f"no bar shows usage: {bars}")
    check(all(bar in bars[-2:] for bar in busy), f"usage shows before today: {busy}")
    check(max(bar["height"] for bar in bars) == 160, f"the tallest bar is not at full height: {busy}")
    check("local/test-model" in usage["models"], f"the models table lists {usage['models']}")
    check("local/test-model" in usage["modelBars"], f"the model chart shows {usage['modelBars']}")
    check(usage["days"] == [bar["day"] for bar in busy], f"the day table lists {usage['days']}, the chart {busy}")
    check(re.match(r"[1-9]\d* model calls · [1-9]\d* tokens", usage["total"]), f"the usage total is {usage['total']!r}")
    return usage


def check_owner_usage(browser, user):
    usage = read_usage(browser, user)
    check(usage["scope"] == "everyone, last 30 days", f"the owner's usage scope is {usage['scope']!r}")
    check(sorted(usage["users"]) == sorted(["owner", user]), f"the owner's usage lists {usage['users']}")
    print(f"ok: owner's usage: chart of {len(usage['bars'])} days, users {usage['users']}, {usage['total']}")
    browser.screenshot("03-owner-usage.png")


def check_audit(browser, user, approval_id):
    browser.open_panel("audit")
    listed = rows(browser, AUDIT_SCRIPT)
    check(listed, "the Audit panel lists no rows")
    seqs = [row["seq"] for row in listed]
    check(seqs == sorted(seqs, reverse=True), f"audit rows are not newest first: {seqs}")

    def one(kind, actor):
        found = [row for row in listed if row["kind"] == kind and row["actor"] == actor and approval_id in row["detail"]]
        check(found, f"no {kind} row by {actor} for request {approval_id}: {listed}")
        return found[0]

    requested = one("approval_requested", user)
    check(requested["subject"] == "exec", f"the request row is about {requested['subject']!r}")
    decided = one("approval_decided", "owner")
    check(decided["ok"] == "true" and '"approved"' in decided["detail"], f"the decision row: {decided}")
    check(any(row["kind"] == "login" and row["actor"] == "owner" for row in listed), "the owner's login is not listed")
    print(f"ok: {len(listed)} audit rows, with the request and the owner's approval")

    browser.click("audit-verify")
    verdict = browser.wait(
        "Verify to report",
        lambda d: (text := browser.element("audit-verdict").text) and text != "verifying…" and text,
    )
    found = re.fullmatch(r"The audit chain is intact \((\d+) rows\)\.", verdict)
    check(found, f"Verify reports {verdict!r}")
    check(int(found.group(1)) >= max(seqs), f"Verify checked {found.group(1)} rows, the trail has {max(seqs)}")
    print(f"ok: {verdict}")
    browser.screenshot("04-owner-audit.png")


def check_owner(browser, args):
    log_in_with(browser, args.url, args.owner_token)
    print("ok: the owner logged in")
    check_owner_nav(browser)
    check_users(browser, args.user)
    check_approvals(browser, args.user, args.approval_id)
    check_owner_usage(browser, args.user)
    check_audit(browser, args.user, args.approval_id)
    check_axe(browser, ["chat", "usage", "users", "approvals", "audit"], fail=lambda message: check(False, message))


def check_person(browser, args):
    log_in_with(browser, args.url, args.user_token)
    whoami = browser.wait_visible("whoami").text
    check(whoami.endswith(" · user") and args.user in whoami.lower(), f"the person is shown as {whoami!r}")
    session = browser.element("chat-session").get_attribute("value")
    check(session == f"agent:main:user:{args.user}", f"the person's chat opens {session!r}")
    print(f"ok: {args.user} logged in as {whoami!r}, chatting in {session}")
    for panel in ADMIN_PANELS:
        check(not nav_shown(browser, panel), f"{args.user} is offered the {panel} panel")
        check(not browser.element(f"panel-{panel}").is_displayed(), f"{args.user} sees the {panel} panel")
        state = browser.state(f"panel-{panel}")
        check(state == "idle", f"the {panel} panel loaded for {args.user} ({state})")
    check(not browser.element("approvals-count").is_displayed(), f"{args.user} sees the pending approvals badge")
    check(nav_shown(browser, "usage"), f"{args.user} is not offered the usage panel")
    print(f"ok: {args.user} is offered usage but not users, approvals or audit")

    usage = read_usage(browser, args.user)
    check(usage["scope"] == "yours, last 30 days", f"{args.user}'s usage scope is {usage['scope']!r}")
    check(usage["users"] == [args.user], f"{args.user}'s usage lists {usage['users']}")
    for panel in ADMIN_PANELS:
        check(not browser.element(f"panel-{panel}").is_displayed(), f"{args.user} sees the {panel} panel")
    print(f"ok: {args.user}'s usage: only theirs, {usage['total']}")
    browser.screenshot("05-user-usage.png")


def start_browser(args):
    options = Options()
    options.binary_location = args.chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=args.chromedriver))


def session(who, checks, args):
    """Runs `checks` in a browser of its own; True when every check and the console are clean."""
    try:
        driver = start_browser(args)
    except WebDriverException as error:
        print(f"web UI check failed: can't start Chromium: {error.msg}", file=sys.stderr)
        return False
    browser = Browser(driver, args.screenshots, args.timeout)
    try:
        checks(browser, args)
        errors = console_errors(driver)
        check(not errors, f"the {who}'s browser console has errors:\n" + "\n".join(errors))
        print(f"ok: no console errors as the {who}")
        return True
    except (CheckFailed, WebDriverException) as error:
        message = str(error) if isinstance(error, CheckFailed) else f"browser error: {error.msg}"
        print(f"web UI check failed as the {who}: {message}", file=sys.stderr)
        try:
            driver.save_screenshot(str(args.screenshots / f"failure-{who}.png"))
            console = "\n".join(entry["message"] for entry in driver.get_log("browser"))
            (args.screenshots / f"failure-{who}-console.txt").write_text(console)
            print(f"see {args.screenshots}/failure-{who}.png and failure-{who}-console.txt", file=sys.stderr)
        except WebDriverException:
            pass
        return False
    finally:
        driver.quit()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="gateway base URL, e.g. http://127.0.0.1:18789")
    parser.add_argument("--owner-token", required=True, help="the gateway's own token")
    parser.add_argument("--user-token", required=True, help="the person's sqb_ token")
    parser.add_argument("--user", required=True, help="the person's user id (role `user`)")
    parser.add_argument("--approval-id", required=True, help="the person's pending approval request")
    parser.add_argument("--screenshots", required=True, type=pathlib.Path, help="directory for the PNGs")
    parser.add_argument("--timeout", type=float, default=15, help="seconds to wait for any UI change")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    args.screenshots.mkdir(parents=True, exist_ok=True)

    if not session("owner", check_owner, args):
        return 1
    if not session("person", check_person, args):
        return 1
    print("web UI people panels: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
