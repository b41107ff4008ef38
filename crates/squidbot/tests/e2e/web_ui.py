"""Drives squidbot's web UI in headless Chromium: log in, chat, render Markdown safely, open every panel.

Usage: web_ui.py --url http://127.0.0.1:PORT --token T --screenshots DIR --expect-reply TEXT
Exits 0 when every check passes; otherwise prints what failed and exits 1, leaving
`failure.png` and the browser console in DIR.
"""

import argparse
import pathlib
import re
import sys
import time
from urllib.parse import urlparse

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

sys.dont_write_bytecode = True  # importing web_ui_axe must leave no __pycache__ in the source tree
from web_ui_axe import check_axe, check_keyboard  # noqa: E402

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--window-size=1280,900",
]


class CheckFailed(Exception):
    """An expectation about the page did not hold."""


class Browser:
    def __init__(self, driver, screenshots, timeout):
        self.driver = driver
        self.screenshots = screenshots
        self.timeout = timeout

    def element(self, element_id):
        return self.driver.find_element(By.ID, element_id)

    def wait(self, what, condition, timeout=None):
        """Polls `condition(driver)` until truthy; fails naming `what` otherwise."""
        waiter = WebDriverWait(
            self.driver,
            timeout or self.timeout,
            poll_frequency=0.1,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        )
        try:
            return waiter.until(condition)
        except TimeoutException:
            raise CheckFailed(f"timed out after {timeout or self.timeout}s waiting for {what}") from None

    def wait_visible(self, element_id):
        return self.wait(f"#{element_id} to be visible", lambda d: self.visible(element_id))

    def visible(self, element_id):
        element = self.element(element_id)
        return element if element.is_displayed() else None

    def state(self, element_id):
        return self.element(element_id).get_attribute("data-state")

    def wait_state(self, element_id, states):
        def settled(_):
            state = self.state(element_id)
            return state if state in states else None

        return self.wait(f"#{element_id} to reach state {' or '.join(states)}", settled)

    def fill(self, element_id, text):
        field = self.element(element_id)
        field.clear()
        field.send_keys(text)

    def click(self, element_id):
        self.wait(f"#{element_id} to be clickable", lambda d: self.clickable(element_id)).click()

    def clickable(self, element_id):
        element = self.element(element_id)
        return element if element.is_displayed() and element.is_enabled() else None

    def screenshot(self, name):
        path = self.screenshots / name
        if not self.driver.save_screenshot(str(path)):
            raise CheckFailed(f"can't save screenshot {path}")
        print(f"screenshot {path}")

    def open_panel(self, name, settled_states=("loaded",)):
        self.click(f"nav-{name}")
        self.wait_visible(f"panel-{name}")
        state = self.wait_state(f"panel-{name}", (*settled_states, "error"))
        if state == "error":
            raise CheckFailed(f"{name} panel failed to load: {self.error_text(name)}")
        return state

    def error_text(self, panel):
        try:
            return self.element(f"{panel}-error").text or "(no message shown)"
        except NoSuchElementException:
            return "(no error element)"


def check(condition, message):
    if not condition:
        raise CheckFailed(message)


def log_in(browser, mode, secret):
    browser.click(f"login-mode-{mode}")
    browser.fill("login-secret", secret)
    browser.click("login-submit")


def check_login_page(browser, url):
    browser.driver.get(url)
    browser.wait_visible("login-view")
    browser.wait_visible("login-secret")
    host = browser.element("login-gateway").text
    check(host == urlparse(url).netloc, f"login page names gateway {host!r}, expected {urlparse(url).netloc!r}")
    check(not browser.element("app-view").is_displayed(), "the app shows before logging in")
    browser.screenshot("01-login.png")


def check_logged_in(browser):
    browser.wait_visible("app-view")
    browser.wait("the connection state to be 'connected'", lambda d: browser.state("conn-state") == "connected")
    check(not browser.element("login-view").is_displayed(), "login form still shown after connecting")


def live_replies(browser):
    return browser.driver.find_elements(By.CSS_SELECTOR, '#chat-log [data-role="assistant"][data-run-id]')


def send_chat(browser, message):
    """Sends `message` and returns the reply bubble of the run it started."""
    before = {bubble.get_attribute("data-run-id") for bubble in live_replies(browser)}
    # Send stays disabled until the session's history has loaded.
    browser.wait("Send to be enabled", lambda d: browser.clickable("chat-send"))
    browser.fill("chat-input", message)
    browser.click("chat-send")
    browser.wait(
        f"the sent message {message!r} to show in the chat",
        lambda d: any(
            bubble.find_element(By.CLASS_NAME, "msg-text").text == message
            for bubble in d.find_elements(By.CSS_SELECTOR, '#chat-log [data-role="user"]')
        ),
    )

    def new_reply(_):
        fresh = [bubble for bubble in live_replies(browser) if bubble.get_attribute("data-run-id") not in before]
        return fresh[-1] if fresh else None

    return browser.wait("a reply bubble for the new run", new_reply)


def check_chat(browser, session, message, expect_reply, expect_tool, reply_timeout):
    browser.wait_visible("panel-chat")
    if browser.element("chat-session").get_attribute("value") != session:
        browser.fill("chat-session", session)
        browser.element("chat-session").send_keys(Keys.TAB)
    reply = send_chat(browser, message)
    run_id = reply.get_attribute("data-run-id")

    def finished(_):
        state = reply.get_attribute("data-state")
        return state if state != "streaming" else None

    state = browser.wait(f"run {run_id} to finish", finished, timeout=reply_timeout)
    text = reply.find_element(By.CLASS_NAME, "msg-text").text
    if state == "error":
        raise CheckFailed(f"the run failed: {browser.element('chat-error').text or text!r}")
    check(state == "final", f"run {run_id} ended in state {state!r}, expected 'final'")
    check(expect_reply in text, f"reply {text!r} does not contain {expect_reply!r}")
    deltas = int(reply.get_attribute("data-deltas") or 0)
    check(deltas >= 1, "the reply arrived without any streamed delta")
    browser.wait("the Stop button to hide after the run", lambda d: not browser.element("chat-stop").is_displayed())
    check(not browser.element("chat-error").is_displayed(), f"chat shows an error: {browser.element('chat-error').text}")
    print(f"ok: streamed reply in {deltas} deltas: {text!r}")

    if expect_tool:
        card = browser.wait(f"a finished tool card for {expect_tool!r}", lambda d: tool_card(d, expect_tool, "ok"))
        duration = card.find_element(By.CSS_SELECTOR, '[data-testid="tool-duration"]').text
        check(re.fullmatch(r"\d+ ms|[\d.]+ s", duration), f"the {expect_tool} card shows duration {duration!r}")
        print(f"ok: tool card for {expect_tool}, {duration}")


def tool_card(driver, name, state):
    for card in driver.find_elements(By.CSS_SELECTOR, '#chat-log [data-testid="tool-card"]'):
        if card.get_attribute("data-tool") == name and card.get_attribute("data-state") == state:
            return card
    return None


def check_stop(browser, message):
    reply = send_chat(browser, message)
    browser.wait_visible("chat-stop")
    browser.click("chat-stop")
    browser.wait("the run to end as stopped", lambda d: reply.get_attribute("data-state") == "aborted")
    browser.wait("the Stop button to hide after stopping", lambda d: not browser.element("chat-stop").is_displayed())
    browser.wait("Send to be enabled again", lambda d: browser.element("chat-send").is_enabled())
    print("ok: Stop ended the run")


# What in the transcript could run script, load something or navigate somewhere else.
INJECTION_SCRIPT = """
const log = document.getElementById('chat-log');
const active = 'script, img, iframe, frame, svg, math, object, embed, style, link, meta, base, form, video, audio, source';
const attributes = [...log.querySelectorAll('*')].flatMap((element) => [...element.attributes].map((a) => a.name));
return {
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
  title: document.title,
  active: [...log.querySelectorAll(active)].map((element) => element.outerHTML.slice(0, 120)),
  hrefs: [...log.querySelectorAll('[href]')].map((element) => element.getAttribute('href')),
  links: [...log.querySelectorAll('a')].map((a) => [a.getAttribute('target'), a.getAttribute('rel')]),
  risky: attributes.filter((name) => name.startsWith('on') || ['src', 'srcdoc', 'style', 'action', 'formaction'].includes(name)),
};
"""

RENDER_TIME_SCRIPT = """
const render = window.squidMarkdown.render;
const message = '## Title\\n\\nSome **bold**, `code` and a [link](https://example.com).\\n\\n- one\\n  - two\\n\\n'
  + '```python\\ndef double(x):\\n    return x * 2  # twice\\n```\\n\\n| a | b |\\n|---|--:|\\n| 1 | 2 |\\n';
const box = document.createElement('div');
let started = performance.now();
for (let index = 0; index < 1000; index += 1) box.append(render(message));
const thousand = performance.now() - started;
const hostile = ['*a '.repeat(50000), '[a]('.repeat(50000), '`a ``b '.repeat(12000), '>'.repeat(50000) + ' x',
  '<a@'.repeat(50000), '_a '.repeat(50000), '[a](<'.repeat(50000), '&#'.repeat(50000)];
started = performance.now();
for (const text of hostile) render(text);
return { thousand, hostile: performance.now() - started };
"""


def check_no_injection(browser, where):
    found = browser.driver.execute_script(INJECTION_SCRIPT)
    check(found["pwned"] is None, f"{where}: a payload ran: window.__pwned = {found['pwned']!r}")
    check(found["title"] == "squidbot", f"{where}: a payload changed the title to {found['title']!r}")
    check(not found["active"], f"{where}: the transcript has active elements: {found['active']}")
    check(not found["risky"], f"{where}: the transcript has risky attributes: {found['risky']}")
    for href in found["hrefs"]:
        check(re.match(r"(https?|mailto):", href), f"{where}: a link goes to {href!r}")
    for target, rel in found["links"]:
        check(target == "_blank" and rel == "noopener noreferrer", f"{where}: a link has target {target!r}, rel {rel!r}")
    print(f"ok: {where}: nothing ran, nothing loads, {len(found['hrefs'])} links all http(s)/mailto")


def check_rendered(browser, reply, where):
    def has(selector):
        return reply.find_elements(By.CSS_SELECTOR, selector)

    for selector in ["h2", "strong", "em", "del", ".msg-text > p > code", "table thead th", "table tbody td strong",
                     "pre code.language-html", "ul ul li a", "ol li", "blockquote em", "hr",
                     'a[href="https://example.com/docs"]', "a.md-image-link", "button.md-copy"]:
        check(has(selector), f"{where}: the reply has no {selector}")
    text = reply.find_element(By.CLASS_NAME, "msg-text").text
    for shown in ["<script>window.__pwned = 'script'", "[click me](javascript:", "<img src=x onerror=",
                  "<script>window.__pwned = 'entity'</script>", "<b onmouseover="]:
        check(shown in text, f"{where}: the reply does not show {shown!r} as text")
    code = reply.find_element(By.CSS_SELECTOR, "pre code.language-html").text
    check("<script>window.__pwned = 'fence'</script>" in code, f"{where}: the code block shows {code!r}")
    check(has("pre code.language-html .tok-tag"), f"{where}: the html code block is not highlighted")
    print(f"ok: {where}: headings, emphasis, table, highlighted code, nested lists, quote and rule render")


def check_markdown(browser, message):
    reply = send_chat(browser, message)
    browser.wait("the Markdown reply to finish", lambda d: reply.get_attribute("data-state") == "final")
    card = browser.wait("the read_file card to finish", lambda d: tool_card(d, "read_file", "ok"))
    browser.wait("the read_file card to show its result", lambda d: card.get_attribute("data-result") == "shown")
    check_no_injection(browser, "live reply")
    check_rendered(browser, reply, "live reply")

    # Toggles are buttons: keyboard-reachable, with aria-expanded.
    toggle = card.find_element(By.CSS_SELECTOR, '[data-testid="tool-arguments-toggle"]')
    check(toggle.tag_name == "button" and toggle.get_attribute("aria-expanded") == "false", "arguments start folded")
    toggle.send_keys(Keys.ENTER)
    arguments = card.find_element(By.CSS_SELECTOR, '[data-testid="tool-arguments"]')
    browser.wait("the arguments to unfold", lambda d: arguments.is_displayed())
    check("<img src=x onerror=" in arguments.text and '"path"' in arguments.text, f"arguments show {arguments.text!r}")
    card.find_element(By.CSS_SELECTOR, '[data-testid="tool-result-toggle"]').click()
    result = card.find_element(By.CSS_SELECTOR, '[data-testid="tool-result"]')
    browser.wait("the result to unfold", lambda d: result.is_displayed())
    check("<script>window.__pwned = 'result'</script>" in result.text, f"the result shows {result.text!r}")
    check(result.tag_name == "pre", "the result is not preformatted text")
    print("ok: the tool card shows its arguments and result as text behind button toggles")

    copy = reply.find_element(By.CSS_SELECTOR, "button.md-copy")
    copy.send_keys(Keys.ENTER)
    browser.wait("Copy to answer", lambda d: copy.get_attribute("data-state") in ("copied", "selected"))
    print(f"ok: Copy by keyboard: {copy.get_attribute('data-state')}")
    check_no_injection(browser, "after unfolding")

    timing = browser.driver.execute_script(RENDER_TIME_SCRIPT)
    check(timing["thousand"] < 5000, f"1,000 Markdown messages took {timing['thousand']:.0f} ms")
    check(timing["hostile"] < 5000, f"hostile Markdown took {timing['hostile']:.0f} ms")
    print(f"ok: 1,000 messages render in {timing['thousand']:.0f} ms, hostile inputs in {timing['hostile']:.0f} ms")

    scroll_to = "arguments[0].scrollIntoView({block: 'start'})"
    browser.driver.execute_script(scroll_to, card)
    browser.screenshot("09-markdown.png")
    browser.driver.set_window_size(375, 812)
    browser.driver.execute_script(scroll_to, reply.find_element(By.CSS_SELECTOR, ".md-table"))
    right = browser.driver.execute_script("return arguments[0].getBoundingClientRect().right - window.innerWidth", reply)
    check(right <= 1, f"the reply sticks out {right}px past a phone's width")
    browser.screenshot("10-markdown-phone.png")
    browser.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    browser.screenshot("11-markdown-dark.png")
    browser.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    browser.driver.set_window_size(1280, 900)

    # The same transcript from history: rendered again, the tool card rebuilt from the session.
    browser.driver.refresh()
    check_logged_in(browser)

    def history_reply(driver):
        bubbles = driver.find_elements(By.CSS_SELECTOR, '#chat-log [data-role="assistant"]')
        return next((bubble for bubble in bubbles if bubble.find_elements(By.CSS_SELECTOR, "table")), None)

    reply = browser.wait("the Markdown reply in the history", history_reply)
    card = browser.wait("the read_file card in the history", lambda d: tool_card(d, "read_file", "ok"))
    check(card.get_attribute("data-result") == "shown", "the history's tool card has no result")
    check_no_injection(browser, "history")
    check_rendered(browser, reply, "history")


def check_sessions(browser, session, message, expect_reply):
    browser.open_panel("sessions")
    items = browser.driver.find_elements(By.CSS_SELECTOR, '[data-testid="session-item"]')
    keys = [item.get_attribute("data-key") for item in items]
    check(session in keys, f"session {session!r} not listed; listed: {keys}")
    items[keys.index(session)].click()
    browser.wait(
        f"the transcript of {session!r} to load",
        lambda d: browser.state("session-transcript") in ("loaded", "error")
        and browser.element("session-transcript").get_attribute("data-key") == session,
    )
    check(browser.state("session-transcript") == "loaded", f"transcript failed: {browser.element('session-transcript').text}")
    entries = browser.driver.find_elements(By.CSS_SELECTOR, '#session-transcript [data-testid="transcript-entry"]')
    texts = [entry.find_element(By.CLASS_NAME, "entry-text").text for entry in entries]
    check(any(message in text for text in texts), f"transcript lacks the sent message {message!r}: {texts}")
    check(any(expect_reply in text for text in texts), f"transcript lacks the reply {expect_reply!r}: {texts}")
    active = [entry for entry in entries if entry.get_attribute("data-active") == "true"]
    check(active, "no transcript entry is marked as on the active path")
    print(f"ok: transcript of {session} has {len(entries)} entries, {len(active)} on the active path")
    browser.screenshot("03-sessions.png")


def memory_rows(browser):
    return browser.driver.find_elements(By.CSS_SELECTOR, '#memory-rows [data-testid="memory-item"]')


def row_with(browser, content):
    for row in memory_rows(browser):
        if row.find_element(By.CLASS_NAME, "memory-content").text == content:
            return row
    return None


def check_memory(browser, stamp):
    browser.open_panel("memory")
    browser.wait_state("memory-doc-status", ("loaded", "error"))
    check(browser.state("memory-doc-status") == "loaded", browser.element("memory-doc-status").text)

    word = f"webuicheck{stamp}"
    content = f"The browser check {word} saved this memory"
    browser.fill("memory-new-content", content)
    browser.click("memory-add")
    browser.wait(f"the new memory {content!r} to be listed", lambda d: row_with(browser, content))

    browser.fill("memory-search", word)
    browser.click("memory-search-submit")
    browser.wait_state("panel-memory", ("loaded", "error"))
    browser.wait(f"a search for {word!r} to find the new memory", lambda d: row_with(browser, content))
    print("ok: memory added, listed and found by search")

    line = f"- browser check {stamp}"
    document = browser.element("memory-doc")
    document.click()
    document.send_keys(Keys.CONTROL, Keys.END)
    document.send_keys(Keys.ENTER, line)
    browser.click("memory-doc-save")
    state = browser.wait_state("memory-doc-status", ("saved", "error"))
    check(state == "saved", f"memory.md save failed: {browser.element('memory-doc-status').text}")
    browser.click("memory-doc-reload")
    browser.wait_state("memory-doc-status", ("loaded", "error"))
    saved = browser.element("memory-doc").get_attribute("value")
    check(line in saved, f"memory.md after reload lacks {line!r}: {saved!r}")
    print("ok: memory.md saved and read back")
    browser.screenshot("04-memory.png")

    row_with(browser, content).find_element(By.CSS_SELECTOR, '[data-testid="memory-delete"]').click()
    browser.wait("the deleted memory to disappear", lambda d: browser.state("panel-memory") == "loaded"
                 and row_with(browser, content) is None)
    print("ok: memory deleted")


def check_skills(browser):
    browser.open_panel("skills")
    skills = browser.driver.find_elements(By.CSS_SELECTOR, '#skills-list [data-testid="skill-item"]')
    if skills:
        names = [skill.get_attribute("data-name") for skill in skills]
        check(all(names), f"a listed skill has no name: {names}")
        print(f"ok: skills listed: {names}")
    else:
        empty = browser.element("skills-empty").text
        check(empty == "No skills installed.", f"skills panel shows neither skills nor the empty note: {empty!r}")
        print("ok: skills panel says no skills")
    browser.screenshot("05-skills.png")


# Read in one script call: the panel re-renders its rows every 10 s, so elements found
# one by one could go stale between reads.
CRON_ROWS_SCRIPT = """
return Array.from(document.querySelectorAll('#cron-rows [data-testid="cron-job"]')).map((row) => {
  const cell = (name) => row.querySelector('.' + name).textContent;
  return {
    id: row.dataset.id, kind: row.dataset.kind, status: row.dataset.status, name: cell('cron-name'),
    next: cell('cron-next'), timezone: cell('cron-timezone'), statusText: cell('cron-status'),
    toggle: row.querySelector('[data-testid="cron-toggle"]').textContent,
    removable: Boolean(row.querySelector('[data-testid="cron-remove"]')),
  };
});
"""


def cron_rows(browser):
    return browser.driver.execute_script(CRON_ROWS_SCRIPT)


def cron_row(browser, name):
    return next((row for row in cron_rows(browser) if row["name"] == name), None)


def click_in_cron_row(browser, job_id, testid):
    selector = f'#cron-rows [data-id="{job_id}"] [data-testid="{testid}"]'
    # A stale element (the rows were re-rendered) is retried by `wait`.
    browser.wait(f"{selector} to be clicked", lambda d: d.find_element(By.CSS_SELECTOR, selector).click() or True)


def check_cron_unavailable(browser):
    message = browser.element("cron-message")
    check(message.is_displayed(), "cron is unavailable but no message is shown")
    detail = message.text.removeprefix("Cron is unavailable:").strip()
    check(detail, f"cron unavailable message has no reason: {message.text!r}")
    check(not browser.element("cron-add-section").is_displayed(), "the add form shows without a scheduler")
    print(f"ok: cron panel shows {message.text!r}")


def add_cron_job(browser, name, schedule, timezone):
    browser.fill("cron-new-name", name)
    browser.fill("cron-new-schedule", schedule)
    browser.fill("cron-new-tz", timezone)
    browser.fill("cron-new-message", f"Remind me about {name}")
    browser.click("cron-add")


def toggle_cron_job(browser, job, button, status):
    check(job["toggle"] == button, f"job {job['name']!r} offers {job['toggle']!r}, expected {button!r}")
    click_in_cron_row(browser, job["id"], "cron-toggle")

    def changed(_):
        row = cron_row(browser, job["name"])
        return row if row and row["status"] == status else None

    row = browser.wait(f"job {job['name']!r} to become {status}", changed)
    check(row["statusText"] == status, f"the status cell says {row['statusText']!r}")
    check(not browser.element("cron-action-error").is_displayed(), browser.element("cron-action-error").text)
    return row


def check_cron(browser, stamp, require_scheduler):
    state = browser.open_panel("cron", settled_states=("loaded", "unavailable"))
    if state == "unavailable":
        check(not require_scheduler, f"the scheduler should run: {browser.element('cron-message').text!r}")
        check_cron_unavailable(browser)
        browser.screenshot("06-cron.png")
        return
    placeholder = browser.element("cron-new-tz").get_attribute("placeholder")
    check(placeholder.startswith("Timezone (default "), f"the zone field does not name the default: {placeholder!r}")

    name = f"browser check {stamp}"
    add_cron_job(browser, name, "fortnightly", "")
    error = browser.wait_visible("cron-add-error").text
    check("can't parse schedule \"fortnightly\"" in error, f"a bad schedule shows {error!r}")
    check(cron_row(browser, name) is None, "a job with a bad schedule was added")
    print(f"ok: a bad schedule is refused inline: {error!r}")

    add_cron_job(browser, name, "daily 09:00", "Europe/Berlin")
    job = browser.wait(f"the new job {name!r} to be listed", lambda d: cron_row(browser, name))
    browser.wait("the add error to clear", lambda d: not browser.element("cron-add-error").is_displayed())
    check(re.fullmatch(r"\d{4}-\d\d-\d\d 09:00", job["next"]), f"the new job's next run is {job['next']!r}")
    check(job["timezone"] == "Europe/Berlin", f"the new job's timezone is {job['timezone']!r}")
    check((job["kind"], job["status"]) == ("user", "active"), f"the new job is a {job['kind']} job, {job['status']}")
    check(browser.element("cron-new-name").get_attribute("value") == "", "the form kept the added job's name")
    print(f"ok: cron job added from the form, next run {job['next']}")

    for row in cron_rows(browser):
        offers = "offers" if row["removable"] else "lacks"
        check(row["removable"] == (row["kind"] == "user"), f"the {row['kind']} job {row['name']!r} {offers} Remove")

    job = toggle_cron_job(browser, job, "Pause", "paused")
    print("ok: Pause paused the job")
    job = toggle_cron_job(browser, job, "Resume", "active")
    check(re.fullmatch(r"\d{4}-\d\d-\d\d 09:00", job["next"]), f"the resumed job's next run is {job['next']!r}")
    summary = browser.element("cron-summary").text
    check(re.match(r"\d+ jobs? · \d+ active", summary), f"cron summary {summary!r}")
    print(f"ok: Resume made the job active again, next run {job['next']}; {summary}")
    browser.screenshot("06-cron.png")

    click_in_cron_row(browser, job["id"], "cron-remove")
    browser.wait(f"the removed job {name!r} to disappear", lambda d: cron_row(browser, name) is None)
    print("ok: Remove deleted the job")


def chat_bubbles(browser, role=None):
    selector = '#chat-log [data-testid="chat-message"]' + (f'[data-role="{role}"]' if role else "")
    return browser.driver.find_elements(By.CSS_SELECTOR, selector)


def open_chat_session(browser, session):
    browser.click("nav-chat")
    browser.wait_visible("panel-chat")
    # Not `fill`: clearing the field alone would switch to the main session.
    field = browser.element("chat-session")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(session, Keys.TAB)
    browser.wait(f"the chat to show {session}", lambda d: d.execute_script("return chat.session") == session)
    browser.wait("Send to be enabled", lambda d: browser.clickable("chat-send"))


def send_and_finish(browser, message, reply_timeout):
    """Sends what the composer holds plus `message`; returns the finished reply's text."""
    before = {bubble.get_attribute("data-run-id") for bubble in live_replies(browser)}
    browser.fill("chat-input", message)
    browser.click("chat-send")

    def finished(_):
        fresh = [bubble for bubble in live_replies(browser) if bubble.get_attribute("data-run-id") not in before]
        return fresh[-1] if fresh and fresh[-1].get_attribute("data-state") != "streaming" else None

    reply = browser.wait(f"the reply to {message!r}", finished, timeout=reply_timeout)
    check(reply.get_attribute("data-state") == "final", f"the reply to {message!r} did not finish: {reply.text!r}")
    return reply.find_element(By.CLASS_NAME, "msg-text").text


def branch_items(browser):
    return browser.driver.find_elements(By.CSS_SELECTOR, '#chat-branch-list [data-testid="branch"]')


def check_branches_and_uploads(browser, session, image, reply_timeout):
    """A PNG sent from the composer, a fork at the first message, two branches listed,
    switching back, and an HTML export holding the messages."""
    open_chat_session(browser, session)
    browser.element("chat-file").send_keys(str(image))
    browser.wait("the picked file to be listed", lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="chat-attachment"]')) == 1)
    first = send_and_finish(browser, "what is in this picture?", reply_timeout)
    check("tiny picture" in first, f"unexpected reply to the picture: {first!r}")
    check(browser.element("chat-attachments").get_attribute("hidden") is not None, "the sent file is still listed")
    print("ok: a PNG picked in the composer was sent with the message")

    # The transcript as loaded names its entries: each message offers "Fork here".
    open_chat_session(browser, "agent:main:main")
    open_chat_session(browser, session)
    browser.wait("the transcript with Fork here buttons", lambda d: len(d.find_elements(By.CSS_SELECTOR, '#chat-log [data-testid="fork-here"]')) >= 2)
    chat_bubbles(browser, "user")[0].find_element(By.CSS_SELECTOR, '[data-testid="fork-here"]').click()
    browser.wait("the transcript to end at the forked message", lambda d: len(chat_bubbles(browser)) == 1)
    second = send_and_finish(browser, "take another path", reply_timeout)
    check("second branch" in second, f"unexpected reply on the new branch: {second!r}")

    browser.click("chat-branches-toggle")
    browser.wait("two branches listed", lambda d: browser.state("chat-branches") == "loaded" and len(branch_items(browser)) == 2)
    active = [item.get_attribute("data-active") for item in branch_items(browser)]
    check(active.count("true") == 1, f"not exactly one active branch: {active}")
    browser.screenshot("12-branches.png")
    browser.driver.find_element(By.CSS_SELECTOR, '#chat-branch-list [data-testid="branch-switch"]').click()
    browser.wait(
        "the first branch back in the chat",
        lambda d: any("tiny picture" in bubble.text for bubble in chat_bubbles(browser, "assistant"))
        and not any("second branch" in bubble.text for bubble in chat_bubbles(browser, "assistant")),
    )
    print("ok: forked at the first message, two branches listed, switched back")

    browser.element("chat-export-format").send_keys("HTML")
    browser.click("chat-export")
    link = browser.wait_visible("chat-export-link")
    check(link.get_attribute("href").startswith("blob:"), f"the export link is {link.get_attribute('href')!r}")
    check(link.get_attribute("download").endswith(".html"), f"the export is named {link.get_attribute('download')!r}")
    exported = browser.driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "request('sessions.export', {key: arguments[0], format: 'html'})"
        ".then((result) => done(result.text), (error) => done('failed: ' + error.message));",
        session,
    )
    for text in ("what is in this picture?", "take another path", "tiny picture"):
        check(text in exported, f"the HTML export lacks {text!r}: {exported[:2000]!r}")
    check(exported.lstrip().lower().startswith("<!doctype html"), "the export is not an HTML document")
    browser.click("chat-branches-toggle")
    print("ok: the session exported as HTML through a blob: download")


def check_status(browser):
    browser.open_panel("status")
    browser.click("status-refresh")
    browser.wait_state("panel-status", ("loaded", "error"))
    check(browser.state("panel-status") == "loaded", f"status refresh failed: {browser.error_text('status')}")
    uptime = browser.element("status-uptime").text
    check(re.fullmatch(r"(\d+[dhm] )*\d+s", uptime), f"uptime {uptime!r} is not a duration")
    model = browser.element("status-model").text
    check(model and model != "—", f"status shows no model: {model!r}")
    version = browser.element("status-version").text
    check(version and version != "—", f"status shows no version: {version!r}")
    usage = browser.element("status-usage").text
    check(re.match(r"\d+ turns", usage), f"status usage {usage!r} is not a turn count")
    provider = browser.driver.find_element(By.CSS_SELECTOR, '[data-testid="status-provider"]').text
    check("?" not in provider and provider.startswith("local ("), f"status shows provider {provider!r}")
    check("last call ok" in provider, f"status shows no successful call of {provider!r}")
    print(f"ok: status: version {version}, uptime {uptime}, model {model}, usage {usage}")
    browser.screenshot("07-status.png")


def check_remembered_login(browser):
    browser.driver.refresh()
    check_logged_in(browser)
    print("ok: reloading the page logs in again from session storage")


def check_wrong_secret(browser, mode, secret):
    browser.click("logout")
    browser.wait_visible("login-view")
    log_in(browser, mode, "wrong-" + secret)
    error = browser.wait_visible("login-error").text
    check(error.startswith("Login failed") or "attempts" in error, f"unexpected login error text {error!r}")
    check(not browser.element("app-view").is_displayed(), "the app shows after a wrong secret")
    print(f"ok: wrong {mode} refused: {error!r}")
    browser.screenshot("08-login-rejected.png")


def console_errors(driver):
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def run(browser, args):
    mode, secret = ("password", args.password) if args.password else ("token", args.token)
    stamp = str(int(time.time() * 1000))
    message = args.message or f"Hello from the browser check {stamp}"

    check_login_page(browser, args.url)
    log_in(browser, mode, secret)
    check_logged_in(browser)
    print("ok: logged in")
    check_chat(browser, args.session, message, args.expect_reply, args.expect_tool, args.reply_timeout)
    if args.stop_message:
        check_stop(browser, args.stop_message)
    browser.screenshot("02-chat.png")
    if args.markdown_message:
        check_markdown(browser, args.markdown_message)
    check_sessions(browser, args.session, message, args.expect_reply)
    check_memory(browser, stamp)
    check_skills(browser)
    check_cron(browser, stamp, args.expect_cron)
    if args.upload_image:
        check_branches_and_uploads(browser, "agent:main:branches", args.upload_image, args.reply_timeout)
    check_status(browser)
    check_remembered_login(browser)
    panels = [panel for panel in ("chat", "status", "usage", "users", "approvals") if browser.clickable(f"nav-{panel}")]
    check_axe(browser, panels, fail=lambda message: check(False, message))
    if args.keyboard_message:
        check_keyboard(browser, args.keyboard_message, fail=lambda message: check(False, message))
    errors = console_errors(browser.driver)
    check(not errors, "the browser console has errors:\n" + "\n".join(errors))
    check_wrong_secret(browser, mode, secret)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="gateway base URL, e.g. http://127.0.0.1:18789")
    secrets = parser.add_mutually_exclusive_group(required=True)
    secrets.add_argument("--token", help="gateway token to log in with")
    secrets.add_argument("--password", help="gateway password to log in with")
    parser.add_argument("--screenshots", required=True, type=pathlib.Path, help="directory for the PNGs")
    parser.add_argument("--expect-reply", required=True, help="text the streamed reply must contain")
    parser.add_argument("--message", help="chat message to send (default: a unique greeting)")
    parser.add_argument("--session", default="agent:main:main", help="session key the chat uses")
    parser.add_argument("--expect-tool", help="tool name whose activity must show in the chat")
    parser.add_argument("--expect-cron", action="store_true", help="the scheduler runs: add, pause and resume a job")
    parser.add_argument("--stop-message", help="also send this message and press Stop while it streams")
    parser.add_argument("--markdown-message", help="also send this message; the reply is the XSS corpus")
    parser.add_argument("--keyboard-message", help="also send this message with Tab and Enter alone")
    parser.add_argument("--upload-image", type=pathlib.Path, help="PNG to send; then fork, switch and export")
    parser.add_argument("--reply-timeout", type=float, default=60, help="seconds to wait for the reply")
    parser.add_argument("--timeout", type=float, default=15, help="seconds to wait for any other UI change")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    args.screenshots.mkdir(parents=True, exist_ok=True)

    options = Options()
    options.binary_location = args.chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(executable_path=args.chromedriver))
    except WebDriverException as error:
        print(f"web UI check failed: can't start Chromium: {error.msg}", file=sys.stderr)
        return 1
    browser = Browser(driver, args.screenshots, args.timeout)
    try:
        run(browser, args)
        print("web UI: all checks passed")
        return 0
    except (CheckFailed, WebDriverException) as error:
        message = str(error) if isinstance(error, CheckFailed) else f"browser error: {error.msg}"
        print(f"web UI check failed: {message}", file=sys.stderr)
        try:
            driver.save_screenshot(str(args.screenshots / "failure.png"))
            console = "\n".join(entry["message"] for entry in driver.get_log("browser"))
            (args.screenshots / "failure-console.txt").write_text(console)
            print(f"see {args.screenshots}/failure.png and failure-console.txt", file=sys.stderr)
        except WebDriverException:
            pass
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
