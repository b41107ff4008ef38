//! The web UI in real headless Chromium, driven by Selenium (`web_ui.py`): log in, chat
//! with a streamed reply and a tool call, stop a running reply, a Markdown reply and a
//! tool result full of script injections (nothing runs, nothing loads, benign Markdown
//! renders), open every panel, add a cron job from the Cron panel's form and pause, resume
//! and remove it, a PNG sent from the composer reaching the model as an image, a fork at
//! the first message with two branches listed, a switch back and an HTML export, axe-core on the panels (desktop and 375 px, light and dark), a message
//! sent with Tab and Enter alone, and a refused login. Screenshots land in `target/artifacts/web-ui/`.
//! scripts/test installs Chromium, chromedriver and Selenium and names the Python in
//! `SQUIDBOT_TEST_PYTHON`, and axe-core's `axe.min.js` in `SQUIDBOT_TEST_AXE`.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{TOKEN, gateway_home, start_with_vision};

/// A 1×1 PNG, the picture the browser sends.
const TINY_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// Every payload would set `window.__pwned` or the title if it ever ran; around them, benign
/// Markdown that must render (heading, emphasis, table, code with a Copy button, lists).
const XSS_REPLY: &str = r#"## Rendering check

Plain **strong**, *emphasis*, ~~struck~~ and `inline <b>code</b>`.

<script>window.__pwned = 'script'; document.title = 'pwned'</script>

<img src=x onerror="window.__pwned = 'img'">

<svg onload="window.__pwned = 'svg'"><circle r=1></svg>

<iframe src="javascript:window.__pwned = 'iframe'"></iframe>

<a href="data:text/html,<script>window.__pwned = 'data-anchor'</script>">data anchor</a>

[click me](javascript:window.__pwned='js-link') [vb](vbscript:msgbox(1)) [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) [relative](/ui/app.js) [spaced](  javascript:alert(1)) <javascript:alert(1)>

[quote and angle](https://example.com/a"><img/src=x/onerror=window.__pwned='quote'>) and [title](https://example.com/b "x"><svg/onload=window.__pwned='title'>")

![remote image](https://example.com/pixel.png)

<b onmouseover="window.__pwned = 'b'">broken <i>html <div class="x

&lt;script&gt;window.__pwned = 'entity'&lt;/script&gt; &amp; &#60;img src=x&#62;

| Payload | Count |
| :------ | ----: |
| <script>window.__pwned = 'cell'</script> | `1` |
| **bold cell** | 2 |

```html
<script>window.__pwned = 'fence'</script>
<img src=x onerror="window.__pwned = 'fence-img'">
```

- outer item
  - nested [safe link](https://example.com/docs)
1. first
2. second

> quoted *text*

---
Done."#;

/// The tool result the browser shows: the same kinds of markup, as a file the model reads.
const XSS_FILE: &str = "<script>window.__pwned = 'result'</script>\n<img src=x onerror=\"window.__pwned = 'result-img'\">\n\
    <svg onload=\"window.__pwned = 'result-svg'\"></svg><iframe srcdoc=\"<script>parent.__pwned = 1</script>\"></iframe>\n\
    [link](javascript:window.__pwned='result-link')\n";

/// Its name is a payload too: the card shows it in the arguments.
const XSS_FILE_NAME: &str = "<img src=x onerror=window.__pwned='arguments'>.txt";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_ui_works_in_headless_chromium() {
    let python = std::env::var("SQUIDBOT_TEST_PYTHON")
        .expect("SQUIDBOT_TEST_PYTHON must name a Python with selenium; scripts/test sets it up");
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join(XSS_FILE_NAME), XSS_FILE).unwrap();
    let image = home.path().join("tiny.png");
    std::fs::write(&image, base64::engine::general_purpose::STANDARD.decode(TINY_PNG).unwrap()).unwrap();
    let running = start_with_vision(&home).await;
    server.push(Reply::tool_call("list_dir", json!({})));
    server.push(Reply::text("The workspace is tidy and the browser sees this reply."));
    server.push(Reply::StallStream { text: "this reply will be stopped".into() });
    server.push(Reply::tool_call("read_file", json!({"path": XSS_FILE_NAME})));
    server.push(Reply::text(XSS_REPLY));
    server.push(Reply::text("I see a tiny picture."));
    server.push(Reply::text("This is a second branch."));
    server.push(Reply::text("Sent from the keyboard and answered."));

    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let screenshots = manifest.join("../../target/artifacts/web-ui");
    std::fs::create_dir_all(&screenshots).unwrap();
    for old in std::fs::read_dir(&screenshots).unwrap().flatten() {
        std::fs::remove_file(old.path()).unwrap();
    }
    let driver = manifest.join("tests/e2e/web_ui.py");
    let output = tokio::process::Command::new(python)
        .arg(driver)
        .args(["--url", &running.base, "--token", TOKEN, "--screenshots"])
        .arg(&screenshots)
        .args(["--expect-reply", "the browser sees this reply", "--expect-tool", "list_dir"])
        .args(["--stop-message", "tell me a very long story"])
        .args(["--markdown-message", "show me everything Markdown can do"])
        .args(["--keyboard-message", "typed and sent with the keyboard alone"])
        .arg("--expect-cron")
        .arg("--upload-image")
        .arg(&image)
        .kill_on_drop(true)
        .output();
    let output =
        tokio::time::timeout(Duration::from_secs(300), output).await.expect("the browser test finished").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "web_ui.py failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("sent with Tab and Enter alone"), "no keyboard check:\n{stdout}");
    if std::env::var_os("SQUIDBOT_TEST_AXE_UNAVAILABLE").is_none() {
        assert!(stdout.contains("ok: axe at phone width in dark"), "no axe-core check:\n{stdout}");
    }
    let names = [
        "01-login",
        "02-chat",
        "03-sessions",
        "04-memory",
        "05-skills",
        "06-cron",
        "07-status",
        "08-login-rejected",
        "09-markdown",
        "10-markdown-phone",
        "11-markdown-dark",
        "12-branches",
    ];
    for name in names {
        let path = screenshots.join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        assert!(bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"), "{} is not a screenshot", path.display());
    }
    let models_seen = server.requests().len();
    assert!(models_seen >= 5, "the chat reached the model ({models_seen} requests)");
    let png_url = format!("data:image/png;base64,{TINY_PNG}");
    let pictured = server.requests().iter().any(|request| {
        crate::harness::messages(&request.body).iter().any(|message| {
            message["content"].as_array().is_some_and(|parts| {
                parts.iter().any(|part| part["type"] == "image_url" && part["image_url"]["url"] == png_url.as_str())
            })
        })
    });
    assert!(pictured, "the PNG sent from the browser reached the model as an image part");
}
