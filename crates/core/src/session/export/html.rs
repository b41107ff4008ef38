//! The HTML export: one page, CSS inline, no scripts; every text escaped (model and tool
//! text is untrusted), tool calls and results folded in `<details>`.

use squidbot_types::session::{EntryBody, MessageRole, SessionEntry};

use super::Item;
use crate::session::Session;

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222;background:#fff}\
header{border-bottom:1px solid #ccc;margin-bottom:1rem}.meta{color:#666;font-size:.85em}\
.entry{margin:.6rem 0;padding:.5rem .8rem;border-radius:6px;border:1px solid #e2e2e2}\
.user{background:#eef5ff}.assistant{background:#f7f7f7}.note{background:#fffbe8}.other{opacity:.75}\
.text{white-space:pre-wrap;overflow-wrap:anywhere}pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f2f2f2;padding:.5rem;border-radius:4px}\
.branch{border-left:3px solid #9ab;padding-left:.8rem;margin:1rem 0}.branch.active{border-color:#2a7}\
.branch>h3{font-size:1em;margin:.2rem 0}.error{color:#a00}\
@media(prefers-color-scheme:dark){body{color:#ddd;background:#161616}.entry{border-color:#333}.user{background:#1b2636}\
.assistant{background:#202020}.note{background:#2a2616}pre{background:#262626}.meta{color:#999}}";

/// Escapes `text` for HTML text and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

pub(super) fn render(session: &Session, items: &[Item]) -> String {
    let header = session.header();
    let key = escape(&header.key);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <title>Session {key}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header><h1>Session {key}</h1>\n\
         <p class=\"meta\">context {} · created {} · {} entries</p></header>\n<main>\n",
        escape(&header.context),
        escape(&header.created),
        session.entries().len()
    );
    for item in items {
        match item {
            Item::BranchStart { from, number, of, active } => {
                let class = if *active { "branch active" } else { "branch" };
                let marker = if *active { " (active)" } else { "" };
                out.push_str(&format!(
                    "<section class=\"{class}\"><h3>Branch {number} of {of} from entry <code>{}</code>{marker}</h3>\n",
                    escape(from)
                ));
            }
            Item::BranchEnd => out.push_str("</section>\n"),
            Item::Entry { entry, active } => entry_html(&mut out, entry, *active),
        }
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn entry_html(out: &mut String, entry: &SessionEntry, active: bool) {
    let other = if active { "" } else { " other" };
    let meta = format!(
        "<span class=\"meta\"><code>{}</code> · <time datetime=\"{stamp}\">{stamp}</time></span>",
        escape(&entry.id),
        stamp = escape(&entry.timestamp)
    );
    let id = escape(&entry.id);
    match &entry.body {
        EntryBody::Message { role, content, model, interrupted, .. } => {
            let (class, who) = match role {
                MessageRole::User => ("user", "User".to_owned()),
                MessageRole::Assistant => (
                    "assistant",
                    match model {
                        Some(model) => format!("Assistant ({})", escape(model)),
                        None => "Assistant".to_owned(),
                    },
                ),
            };
            let flag = if *interrupted { " · interrupted" } else { "" };
            out.push_str(&format!(
                "<article class=\"entry {class}{other}\" id=\"e-{id}\"><b>{who}</b>{flag} {meta}\
                 <div class=\"text\">{}</div></article>\n",
                escape(content)
            ));
        }
        EntryBody::ToolCall { name, arguments, .. } => out.push_str(&format!(
            "<details class=\"entry{other}\" id=\"e-{id}\"><summary>Tool call <code>{}</code> {meta}</summary>\
             <pre>{}</pre></details>\n",
            escape(name),
            escape(arguments)
        )),
        EntryBody::ToolResult { name, content, is_error, .. } => {
            let error = if *is_error { " <span class=\"error\">(error)</span>" } else { "" };
            out.push_str(&format!(
                "<details class=\"entry{other}\" id=\"e-{id}\"><summary>Tool result <code>{}</code>{error} {meta}</summary>\
                 <pre>{}</pre></details>\n",
                escape(name),
                escape(content)
            ));
        }
        EntryBody::Compaction { summary, condensed, method, .. } => out.push_str(&format!(
            "<details class=\"entry note{other}\" id=\"e-{id}\"><summary>Compaction ({}): {condensed} messages \
             condensed {meta}</summary><div class=\"text\">{}</div></details>\n",
            escape(method),
            escape(summary)
        )),
        EntryBody::Delegate { agent, worker, status, task, result, session } => out.push_str(&format!(
            "<details class=\"entry note{other}\" id=\"e-{id}\"><summary>Background {} {} {} (session <code>{}</code>) \
             {meta}</summary><p>Task: {}</p><div class=\"text\">{}</div></details>\n",
            escape(agent),
            escape(worker),
            escape(status),
            escape(session),
            escape(task),
            escape(result)
        )),
        EntryBody::ModelChange { previous, new } => {
            let previous = if previous.is_empty() { "none" } else { previous.as_str() };
            out.push_str(&format!(
                "<p class=\"entry note{other}\" id=\"e-{id}\">Model {} → {} {meta}</p>\n",
                escape(previous),
                escape(new)
            ));
        }
    }
}
