"""Measures the web UI in headless Chromium: the first load's transferred bytes and the time
to render a long transcript. A benchmark, not a test: it prints numbers and fails only when
the page does not work. scripts/bench-web-ui starts the gateway and writes the session.

Usage: web_ui_bench.py --url http://127.0.0.1:PORT --token T --session KEY --messages N [--rounds R]
"""

import argparse
import statistics
import sys

sys.dont_write_bytecode = True  # importing web_ui must leave no __pycache__ in the source tree

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

from web_ui import CHROMIUM_FLAGS, Browser, check_logged_in, log_in  # noqa: E402

# Everything the page fetched over HTTP, as the browser counted it: the document, then its
# scripts and stylesheet (headers included in `transferSize`; the WebSocket is not a resource).
TRANSFERRED = """
const entries = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
return entries.map((entry) => ({ name: entry.name, transfer: entry.transferSize, body: entry.decodedBodySize }));
"""

# Switches the chat to `key` the way typing it does, then waits until the history is in
# and painted (Send enabled, `expected` bubbles, one animation frame after).
CHAT_RENDER = """
const [key, expected, done] = arguments;
const input = document.getElementById('chat-session');
const log = document.getElementById('chat-log');
const started = performance.now();
input.value = key;
input.dispatchEvent(new Event('change'));
const poll = () => {
  const ready = !document.getElementById('chat-send').disabled && log.children.length >= expected;
  if (ready) requestAnimationFrame(() => done({ ms: performance.now() - started, bubbles: log.children.length }));
  else if (performance.now() - started > 30000) done({ ms: -1, bubbles: log.children.length });
  else setTimeout(poll, 1);
};
poll();
"""

# Opens `key` in the Sessions panel (its whole tree, every entry) and waits until painted.
TRANSCRIPT_RENDER = """
const [key, done] = arguments;
const item = [...document.querySelectorAll('#sessions-list .session-item')].find((each) => each.dataset.key === key);
const view = document.getElementById('session-transcript');
view.dataset.state = 'idle';
const started = performance.now();
item.click();
const poll = () => {
  if (view.dataset.state === 'loaded') {
    requestAnimationFrame(() => done({ ms: performance.now() - started, nodes: view.getElementsByTagName('*').length }));
  } else if (performance.now() - started > 30000) done({ ms: -1, nodes: 0 });
  else setTimeout(poll, 1);
};
poll();
"""


def median_ms(samples):
    return f"median {statistics.median(samples):.0f} ms (min {min(samples):.0f}, max {max(samples):.0f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--session", required=True, help="key of the long session")
    parser.add_argument("--messages", type=int, required=True, help="messages the long session holds")
    parser.add_argument("--chat-shows", type=int, default=200, help="messages the chat loads of a session")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    options = Options()
    options.binary_location = args.chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=args.chromedriver))
    driver.set_script_timeout(60)
    browser = Browser(driver, None, 30)
    try:
        # A first visit: nothing cached.
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        driver.get(args.url)
        browser.wait_visible("login-secret")
        log_in(browser, "token", args.token)
        check_logged_in(browser)
        entries = driver.execute_script(TRANSFERRED)
        transferred = sum(entry["transfer"] for entry in entries)
        decoded = sum(entry["body"] for entry in entries)
        for entry in entries:
            print(f"  {entry['name']}: {entry['transfer']} bytes transferred, {entry['body']} decoded")
        print(f"first load: {transferred} bytes transferred ({transferred / 1024:.1f} KiB), "
              f"{decoded} bytes decoded, {len(entries)} requests")

        chat = []
        shown = min(args.messages, args.chat_shows)
        for _ in range(args.rounds):
            result = driver.execute_async_script(CHAT_RENDER, args.session, shown)
            if result["ms"] < 0:
                raise AssertionError(f"the chat showed {result['bubbles']} of {shown} messages within 30 s")
            chat.append(result["ms"])
            driver.execute_async_script(CHAT_RENDER, "agent:main:bench-empty", 0)
        print(f"chat, the last {shown} of {args.messages} messages: {median_ms(chat)} over {args.rounds} rounds")

        browser.open_panel("sessions")
        browser.wait("the long session in the list", lambda d: d.execute_script(
            "return [...document.querySelectorAll('#sessions-list .session-item')]"
            ".some((each) => each.dataset.key === arguments[0])", args.session))
        transcript = []
        for _ in range(args.rounds):
            result = driver.execute_async_script(TRANSCRIPT_RENDER, args.session)
            if result["ms"] < 0:
                raise AssertionError("the transcript did not render within 30 s")
            transcript.append(result["ms"])
        print(f"sessions panel, all {args.messages} messages ({result['nodes']} elements): "
              f"{median_ms(transcript)} over {args.rounds} rounds")
        return 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
