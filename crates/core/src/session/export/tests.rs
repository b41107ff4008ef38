//! Tests of the Markdown and HTML exports: branches marked, hostile text escaped, secrets
//! redacted.

use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionHeader};

use super::*;

fn message(role: MessageRole, content: &str) -> EntryBody {
    EntryBody::Message {
        role,
        content: content.into(),
        images: Vec::new(),
        model: None,
        usage: None,
        interrupted: false,
    }
}

const HOSTILE: &str = "<script>alert(1)</script> \"><img src=x onerror=alert(2)>";

fn forked() -> Session {
    let mut session = Session::new(SessionHeader {
        kind: HeaderTag::Header,
        version: SESSION_FORMAT_VERSION,
        id: "s".into(),
        key: "cli:<b>".into(),
        context: "owner".into(),
        created: "2026-11-21T00:00:00Z".into(),
    });
    session.push(EntryBody::ModelChange { previous: String::new(), new: "test/model".into() }, "t0".into());
    session.push(message(MessageRole::User, HOSTILE), "t1".into());
    let reply = session.push(message(MessageRole::Assistant, "first reply"), "t2".into()).id;
    session.push(
        EntryBody::ToolCall {
            call_id: "c1".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"</pre>\"}".into(),
        },
        "t3".into(),
    );
    session.push(
        EntryBody::ToolResult {
            call_id: "c1".into(),
            name: "read_file".into(),
            content: format!("{HOSTILE} key sk-secret-value-123456"),
            is_error: false,
        },
        "t4".into(),
    );
    assert!(session.checkout(&reply));
    session.push(message(MessageRole::User, "the other branch"), "t5".into());
    session
}

#[test]
fn html_escapes_hostile_text_and_marks_both_branches() {
    let session = forked();
    let scanner = LeakScanner::new(["sk-secret-value-123456".to_owned()]);
    let export = export(&session, ExportFormat::Html, ExportScope::WholeTree, &scanner);
    let html = &export.text;
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
    assert!(html.contains("&lt;/pre&gt;"), "arguments can't close the <pre>");
    assert!(html.contains("Session cli:&lt;b&gt;"));
    assert!(html.contains("Branch 1 of 2") && html.contains("Branch 2 of 2"));
    assert!(html.contains("the other branch") && html.contains("<details"));
    assert!(html.contains("Model none → test/model"));
    assert!(!html.contains("sk-secret-value-123456") && export.redactions == 1);
    assert_eq!(html.matches("<section").count(), html.matches("</section>").count());
}

#[test]
fn markdown_keeps_the_active_branch_only_when_asked() {
    let session = forked();
    let scanner = LeakScanner::new(Vec::new());
    let whole = export(&session, ExportFormat::Markdown, ExportScope::WholeTree, &scanner).text;
    assert!(whole.contains("Branch 2 of 2 from entry") && whole.contains("read_file"), "{whole}");
    let active = export(&session, ExportFormat::Markdown, ExportScope::ActiveBranch, &scanner).text;
    assert!(active.contains("the other branch") && !active.contains("read_file"), "{active}");
    assert!(!active.contains("Branch"));
}

#[test]
fn formats_are_read_by_name() {
    assert_eq!(ExportFormat::parse("HTML"), Some(ExportFormat::Html));
    assert_eq!(ExportFormat::parse("md"), Some(ExportFormat::Markdown));
    assert_eq!(ExportFormat::parse("pdf"), None);
}
