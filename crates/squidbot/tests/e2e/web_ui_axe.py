"""Accessibility checks for web_ui.py and web_ui_people.py: axe-core on every panel at desktop
and phone width in light and dark, and the chat reached and sent with Tab and Enter alone.

axe-core's `axe.min.js` is named by SQUIDBOT_TEST_AXE (scripts/test installs it); without
it the check fails unless SQUIDBOT_TEST_AXE_UNAVAILABLE is set, when it is skipped.
"""

import os
import pathlib

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

# What the page must never have; "moderate" and "minor" findings are printed, not failed.
FAILING_IMPACTS = ("serious", "critical")

VIEWPORTS = (("desktop", 1280, 900), ("phone", 375, 812))
SCHEMES = ("light", "dark")

RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, { resultTypes: ['violations'] }).then((results) => done(results.violations.map((violation) => ({
  id: violation.id, impact: violation.impact, help: violation.help,
  nodes: violation.nodes.slice(0, 5).map((node) => node.target.join(' ') + ': '
    + (node.failureSummary || '').replace(/\\s+/g, ' ')),
})))).catch((error) => done([{ id: 'axe-error', impact: 'critical', help: String(error), nodes: [] }]));
"""


def axe_source():
    """axe.min.js, or None when the environment says it is unavailable; fails otherwise."""
    path = os.environ.get("SQUIDBOT_TEST_AXE")
    if path and pathlib.Path(path).is_file():
        return pathlib.Path(path).read_text()
    if os.environ.get("SQUIDBOT_TEST_AXE_UNAVAILABLE"):
        print("skipped: axe-core (SQUIDBOT_TEST_AXE_UNAVAILABLE is set)")
        return None
    raise AssertionError(
        f"SQUIDBOT_TEST_AXE must name axe-core's axe.min.js (scripts/test installs it; it is {path!r}), "
        "or set SQUIDBOT_TEST_AXE_UNAVAILABLE to skip the accessibility check"
    )


def set_scheme(driver, scheme):
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    )


def panel_violations(browser, source):
    """axe's serious and critical findings on the page as it is now."""
    if not browser.driver.execute_script("return typeof window.axe === 'object'"):
        browser.driver.execute_script(source)
    browser.driver.set_script_timeout(60)
    violations = browser.driver.execute_async_script(RUN_AXE)
    for violation in violations:
        if violation["impact"] not in FAILING_IMPACTS:
            print(f"note: axe {violation['impact']} {violation['id']}: {violation['help']}")
    return [violation for violation in violations if violation["impact"] in FAILING_IMPACTS]


def check_axe(browser, panels, fail):
    """Runs axe on each of `panels` (nav names) at each width in each scheme; `fail(message)`
    raises the caller's failure with every finding listed."""
    source = axe_source()
    if source is None:
        return
    found = []
    driver = browser.driver
    try:
        for width_name, width, height in VIEWPORTS:
            driver.set_window_size(width, height)
            for scheme in SCHEMES:
                set_scheme(driver, scheme)
                for panel in panels:
                    # The chat has no loading state: idle once its history is in.
                    settled = ("idle",) if panel == "chat" else ("loaded", "unavailable")
                    browser.open_panel(panel, settled_states=settled)
                    for violation in panel_violations(browser, source):
                        where = f"{panel}, {width_name}, {scheme}"
                        nodes = "\n      ".join(violation["nodes"])
                        found.append(f"{where}: {violation['impact']} {violation['id']}: {violation['help']}\n      {nodes}")
                print(f"ok: axe at {width_name} width in {scheme}: {', '.join(panels)}")
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        driver.set_window_size(1280, 900)
    if found:
        fail("axe-core found serious or critical violations:\n  " + "\n  ".join(found))


def active_id(driver):
    return driver.execute_script("return document.activeElement ? document.activeElement.id : ''")


FOCUS_IS_AFTER = """
const target = document.getElementById(arguments[0]);
const focused = document.activeElement;
return Boolean(focused && focused !== document.body
  && (target.compareDocumentPosition(focused) & Node.DOCUMENT_POSITION_FOLLOWING));
"""


def tab_to(browser, element_id, fail):
    """Presses Tab, or Shift+Tab when focus is past `element_id`, until it has focus."""
    driver = browser.driver
    backwards = driver.execute_script(FOCUS_IS_AFTER, element_id)
    for _ in range(60):
        if active_id(driver) == element_id:
            return
        actions = ActionChains(driver)
        if backwards:
            actions.key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT)
        else:
            actions.send_keys(Keys.TAB)
        actions.perform()
    fail(f"Tab never reached #{element_id} (focus is on #{active_id(driver)})")


def check_keyboard(browser, message, fail):
    """With Tab, Shift+Tab and Enter only, from wherever focus is: open Status, come back to
    Chat, reach the composer and send `message`; returns once it shows in the chat."""
    driver = browser.driver
    tab_to(browser, "nav-status", fail)
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    browser.wait_visible("panel-status")
    tab_to(browser, "nav-chat", fail)
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    browser.wait_visible("panel-chat")
    browser.wait("Send to be enabled", lambda d: browser.clickable("chat-send"))
    tab_to(browser, "chat-input", fail)
    ActionChains(driver).send_keys(message).send_keys(Keys.ENTER).perform()
    browser.wait(
        f"the message {message!r} typed and sent from the keyboard to show in the chat",
        lambda d: any(
            bubble.text.endswith(message) or message in bubble.text
            for bubble in d.find_elements("css selector", '#chat-log [data-role="user"]')
        ),
    )
    print("ok: Status and Chat opened and a message sent with Tab and Enter alone")
