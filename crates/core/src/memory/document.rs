//! memory.md: one agent-maintained Markdown document per context, edited by sections.

/// Largest memory.md, in characters, unless configured; an edit that would pass it is refused.
pub const DOCUMENT_CAP: usize = squidbot_types::memory::DEFAULT_DOCUMENT_CAP;

/// Storage of the per-context documents. Calls block (small files).
pub trait MemoryDocuments: Send + Sync + 'static {
    /// The document, `None` when there is none yet.
    fn read(&self, context: &str) -> Result<Option<String>, super::MemoryError>;
    /// Replaces the document atomically.
    fn write(&self, context: &str, text: &str) -> Result<(), super::MemoryError>;
    /// Where the document lives, for messages.
    fn location(&self, context: &str) -> String;
}

/// One edit of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentEdit {
    /// New text.
    pub content: String,
    /// Append instead of replace.
    pub append: bool,
    /// A `## heading` to edit; the whole document when `None`.
    pub section: Option<String>,
}

/// Applies an edit. With a section, only that `## section` changes (it is created at the
/// end when missing); without one, the whole document is replaced or appended to.
pub fn apply_edit(document: &str, edit: &DocumentEdit) -> String {
    let content = edit.content.trim();
    let Some(section) = edit.section.as_deref().map(|section| section.trim().trim_start_matches('#').trim()) else {
        return if edit.append && !document.trim().is_empty() {
            format!("{}\n\n{content}\n", document.trim_end())
        } else {
            format!("{content}\n")
        };
    };
    let heading = format!("## {section}");
    let lines: Vec<&str> = document.lines().collect();
    let start = lines.iter().position(|line| line.trim().eq_ignore_ascii_case(&heading));
    let Some(start) = start else {
        let base = document.trim_end();
        let separator = if base.is_empty() { "" } else { "\n\n" };
        return format!("{base}{separator}{heading}\n{content}\n");
    };
    let end = lines[start + 1..]
        .iter()
        .position(|line| line.starts_with("## ") || line.starts_with("# "))
        .map_or(lines.len(), |offset| start + 1 + offset);
    let old_body = lines[start + 1..end].join("\n");
    let body = if edit.append && !old_body.trim().is_empty() {
        format!("{}\n{content}", old_body.trim_end())
    } else {
        content.to_owned()
    };
    let mut result: Vec<String> = lines[..=start].iter().map(|line| (*line).to_owned()).collect();
    result.push(body);
    if end < lines.len() {
        result.push(String::new());
        result.extend(lines[end..].iter().map(|line| (*line).to_owned()));
    }
    let mut text = result.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(content: &str, append: bool, section: Option<&str>) -> DocumentEdit {
        DocumentEdit { content: content.into(), append, section: section.map(str::to_owned) }
    }

    #[test]
    fn sections_are_replaced_appended_or_created() {
        let document = "# Memory\n\n## People\n- Ana is my sister\n\n## Projects\n- squidbot\n";
        let replaced = apply_edit(document, &edit("- Ana lives in Porto", false, Some("People")));
        assert_eq!(replaced, "# Memory\n\n## People\n- Ana lives in Porto\n\n## Projects\n- squidbot\n");
        let appended = apply_edit(document, &edit("- garden", true, Some("## Projects")));
        assert!(appended.ends_with("## Projects\n- squidbot\n- garden\n"), "{appended}");
        let created = apply_edit(document, &edit("- tea", false, Some("Likes")));
        assert!(created.ends_with("- squidbot\n\n## Likes\n- tea\n"), "{created}");
    }

    #[test]
    fn whole_document_replace_and_append() {
        assert_eq!(apply_edit("old", &edit("new", false, None)), "new\n");
        assert_eq!(apply_edit("old\n", &edit("more", true, None)), "old\n\nmore\n");
        assert_eq!(apply_edit("", &edit("first", true, None)), "first\n");
    }
}
