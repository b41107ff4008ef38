//! Tables for platforms without them, as aligned columns of plain text (set in a code
//! block by the caller so they stay aligned), and as HTML for Matrix.

use pulldown_cmark::Alignment;
use unicode_width::UnicodeWidthStr;

use crate::markdown::parse::{Inline, Table, plain_text};

/// The table as aligned text: cells separated by ` | `, the header underlined, each
/// column padded to its widest cell (wide characters count twice) and aligned as the
/// table says. Cells lose their markup; a link keeps its address.
pub(super) fn aligned_text(table: &Table) -> String {
    let head: Vec<String> = table.head.iter().map(|cell| cell_text(cell)).collect();
    let rows: Vec<Vec<String>> =
        table.rows.iter().map(|row| row.iter().map(|cell| cell_text(cell)).collect()).collect();
    let columns = rows.iter().map(Vec::len).chain([head.len(), table.alignments.len()]).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in std::iter::once(&head).chain(&rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    let line = |row: &[String]| {
        let mut cells: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(column, width)| {
                let cell = row.get(column).map_or("", String::as_str);
                let alignment = table.alignments.get(column).copied().unwrap_or(Alignment::None);
                pad(cell, *width, alignment)
            })
            .collect();
        // Empty cells at the end of a row would leave a dangling separator.
        while cells.len() > 1 && cells.last().is_some_and(|cell| cell.trim().is_empty()) {
            cells.pop();
        }
        cells.join(" | ").trim_end().to_owned()
    };
    let rule: Vec<String> = widths.iter().map(|width| "-".repeat((*width).max(1))).collect();
    let mut lines = vec![line(&head), rule.join("-|-")];
    lines.extend(rows.iter().map(|row| line(row)));
    lines.join("\n")
}

/// `cell` padded with spaces to `width` columns.
fn pad(cell: &str, width: usize, alignment: Alignment) -> String {
    let missing = width.saturating_sub(cell.width());
    let (left, right) = match alignment {
        Alignment::None | Alignment::Left => (0, missing),
        Alignment::Right => (missing, 0),
        Alignment::Center => (missing / 2, missing - missing / 2),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}

/// A cell's text: markup dropped, a link as `text (address)`.
fn cell_text(cell: &[Inline]) -> String {
    cell.iter()
        .map(|inline| match inline {
            Inline::Link { content, url } => {
                let label: String = content.iter().map(plain_text).collect();
                if label.is_empty() || label == *url { url.clone() } else { format!("{label} ({url})") }
            }
            other => plain_text(other),
        })
        .collect()
}

/// The table as HTML (`<table>` with a `<thead>` and a `<tbody>`), each cell's content
/// rendered by `cell`. Matrix's HTML has no alignment attributes, so columns keep the
/// client's.
pub(super) fn html(table: &Table, cell: &dyn Fn(&[Inline]) -> String) -> String {
    let row = |cells: &[Vec<Inline>], tag: &str| {
        let cells: String = cells.iter().map(|content| format!("<{tag}>{}</{tag}>", cell(content))).collect();
        format!("<tr>{cells}</tr>")
    };
    let mut html = format!("<table>\n<thead>\n{}\n</thead>", row(&table.head, "th"));
    if !table.rows.is_empty() {
        let rows: Vec<String> = table.rows.iter().map(|cells| row(cells, "td")).collect();
        html.push_str(&format!("\n<tbody>\n{}\n</tbody>", rows.join("\n")));
    }
    html.push_str("\n</table>");
    html
}
