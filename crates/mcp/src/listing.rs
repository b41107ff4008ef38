//! A server's tool list, read leniently and sanitized: a tool whose name, schema or size
//! can't be trusted is skipped with a warning; the rest of the server's tools still work.

use std::collections::BTreeSet;

use rmcp::model::{ClientRequest, CustomRequest};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Map, Value, json};
use squidbot_types::ToolSpec;
use squidbot_types::tool::is_valid_tool_name;

use crate::error::McpError;
use crate::settings::NAME_SEPARATOR;

/// Largest argument schema accepted, serialized.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// Characters of a server's tool description kept.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;

/// Tools taken from one server; a server listing more is cut with a warning.
pub const MAX_TOOLS_PER_SERVER: usize = 128;

/// Pages of `tools/list` followed before giving up on a server that never stops paging.
const MAX_PAGES: usize = 32;

/// One tool of a server, as the model will see it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// The server's own name for it.
    pub remote_name: String,
    /// Name (`server__tool`), description and parameters shown to the model.
    pub spec: ToolSpec,
    /// False only when the server marks the tool read-only.
    pub mutates: bool,
}

/// Asks the server for every page of its tool list, as raw JSON. rmcp's typed
/// `list_all_tools` rejects a whole page when one tool in it is malformed, so the request
/// goes out untyped and each tool is judged on its own by [`sanitize`].
pub async fn list_raw(peer: &Peer<RoleClient>) -> Result<Vec<Value>, McpError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|cursor| json!({ "cursor": cursor }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
        let result = peer.send_request(request).await.map_err(McpError::from_service)?;
        let page = serde_json::to_value(&result)
            .map_err(|error| McpError::Protocol(format!("unreadable tools/list result: {error}")))?;
        match page.get("tools") {
            Some(Value::Array(items)) => tools.extend(items.iter().cloned()),
            _ => return Err(McpError::Protocol("tools/list returned no `tools` array".into())),
        }
        cursor = page.get("nextCursor").and_then(Value::as_str).filter(|next| !next.is_empty()).map(str::to_owned);
        if cursor.is_none() || tools.len() > MAX_TOOLS_PER_SERVER {
            return Ok(tools);
        }
    }
    tracing::warn!("tools/list kept paging; using the first {MAX_PAGES} pages");
    Ok(tools)
}

/// Turns a raw listing into the tools the model may use: allowed by `allow` (empty means
/// all), with valid names and object schemas of sane size. Problems are logged with the
/// server's name.
pub fn sanitize_listing(server: &str, raw: &[Value], allow: &BTreeSet<String>) -> Vec<RemoteTool> {
    let mut tools: Vec<RemoteTool> = Vec::new();
    for item in raw {
        match sanitize(server, item) {
            Ok(tool) if !allow.is_empty() && !allow.contains(&tool.remote_name) => {}
            Ok(tool) if tools.iter().any(|known| known.remote_name == tool.remote_name) => {
                tracing::warn!(server, tool = %tool.remote_name, "MCP server listed a tool twice; keeping the first");
            }
            Ok(tool) if tools.len() == MAX_TOOLS_PER_SERVER => {
                tracing::warn!(server, tool = %tool.remote_name, "MCP server lists more than {MAX_TOOLS_PER_SERVER} tools; skipping the rest");
                break;
            }
            Ok(tool) => tools.push(tool),
            Err(reason) => tracing::warn!(server, "skipping an MCP tool: {reason}"),
        }
    }
    for wanted in allow {
        if !tools.iter().any(|tool| &tool.remote_name == wanted) {
            tracing::warn!(server, tool = %wanted, "allowed MCP tool is not offered by the server");
        }
    }
    tools
}

/// Checks one tool of a listing; `Err` says why it can't be offered to the model.
pub fn sanitize(server: &str, raw: &Value) -> Result<RemoteTool, String> {
    let Some(object) = raw.as_object() else { return Err("a tools/list entry is not an object".into()) };
    let Some(remote_name) = object.get("name").and_then(Value::as_str) else {
        return Err("a tool has no name".into());
    };
    let shown: String = remote_name.chars().take(80).collect();
    let name = format!("{server}{NAME_SEPARATOR}{remote_name}");
    if !is_valid_tool_name(&name) {
        return Err(format!(
            "tool {shown:?}: `{server}{NAME_SEPARATOR}<tool>` must be 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`"
        ));
    }
    let parameters = object_schema(object.get("inputSchema")).map_err(|reason| format!("tool {shown:?}: {reason}"))?;
    let description = object.get("description").and_then(Value::as_str).unwrap_or_default().trim();
    let description = match description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((cut, _)) => format!("[{server}] {}…", &description[..cut]),
        None if description.is_empty() => format!("[{server}] {remote_name}"),
        None => format!("[{server}] {description}"),
    };
    let read_only = object.get("annotations").and_then(|annotations| annotations.get("readOnlyHint"));
    Ok(RemoteTool {
        remote_name: remote_name.to_owned(),
        spec: ToolSpec { name, description, parameters },
        mutates: read_only != Some(&Value::Bool(true)),
    })
}

/// The argument schema as the model gets it: an object schema (a missing `type` is read as
/// `object`) no larger than [`MAX_SCHEMA_BYTES`], with an empty `properties` if none given.
fn object_schema(schema: Option<&Value>) -> Result<Value, String> {
    let mut schema: Map<String, Value> = match schema {
        Some(Value::Object(schema)) => schema.clone(),
        Some(other) => return Err(format!("its inputSchema is not an object but {}", kind(other))),
        None => return Err("it has no inputSchema".into()),
    };
    match schema.get("type") {
        None => {
            schema.insert("type".into(), Value::String("object".into()));
        }
        Some(Value::String(kind)) if kind == "object" => {}
        Some(other) => return Err(format!("its inputSchema has type {other}, not \"object\"")),
    }
    if let Some(properties) = schema.get("properties")
        && !properties.is_object()
    {
        return Err("its inputSchema's properties are not an object".into());
    }
    schema.remove("$schema");
    schema.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    let schema = Value::Object(schema);
    let size = serde_json::to_string(&schema).map_or(usize::MAX, |text| text.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!("its inputSchema takes {size} bytes (at most {MAX_SCHEMA_BYTES})"));
    }
    Ok(schema)
}

/// A JSON value's type, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_namespaced_and_described_with_their_server() {
        let raw = json!({
            "name": "read_file",
            "description": "Read a file.",
            "inputSchema": {"$schema": "x", "type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}
        });
        let tool = sanitize("files", &raw).unwrap();
        assert_eq!(tool.spec.name, "files__read_file");
        assert_eq!(tool.spec.description, "[files] Read a file.");
        assert_eq!(tool.spec.parameters, json!({"type": "object", "properties": {"path": {"type": "string"}}}));
        assert!(!tool.mutates);
        assert!(sanitize("files", &json!({"name": "write", "inputSchema": {}})).unwrap().mutates);
    }

    #[test]
    fn lying_schemas_and_names_are_skipped() {
        let huge = json!({"type": "object", "properties": {"x": {"description": "y".repeat(MAX_SCHEMA_BYTES)}}});
        for (raw, reason) in [
            (json!({"name": "a", "inputSchema": "string"}), "not an object"),
            (json!({"name": "a", "inputSchema": {"type": "array"}}), "not \"object\""),
            (json!({"name": "a", "inputSchema": {"type": "object", "properties": [1]}}), "properties"),
            (json!({"name": "a"}), "no inputSchema"),
            (json!({"name": "a", "inputSchema": huge}), "bytes"),
            (json!({"name": "has space", "inputSchema": {}}), "must be 1 to 64"),
            (json!({"name": "x".repeat(70), "inputSchema": {}}), "must be 1 to 64"),
            (json!({"inputSchema": {}}), "no name"),
            (json!(42), "not an object"),
        ] {
            let error = sanitize("srv", &raw).unwrap_err();
            assert!(error.contains(reason), "{error} should mention {reason}");
        }
    }

    #[test]
    fn the_allowlist_and_duplicates_filter_the_listing() {
        let raw = vec![
            json!({"name": "a", "inputSchema": {}}),
            json!({"name": "b", "inputSchema": {"type": "string"}}),
            json!({"name": "c", "inputSchema": {}}),
            json!({"name": "a", "inputSchema": {}}),
        ];
        let all = sanitize_listing("s", &raw, &BTreeSet::new());
        assert_eq!(all.iter().map(|tool| tool.spec.name.as_str()).collect::<Vec<_>>(), ["s__a", "s__c"]);
        let allowed = sanitize_listing("s", &raw, &BTreeSet::from(["c".to_owned(), "b".to_owned()]));
        assert_eq!(allowed.iter().map(|tool| tool.remote_name.as_str()).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn long_descriptions_are_cut() {
        let raw = json!({"name": "a", "description": "é".repeat(MAX_DESCRIPTION_CHARS + 5), "inputSchema": {}});
        let description = sanitize("s", &raw).unwrap().spec.description;
        assert!(description.ends_with('…'));
        assert_eq!(description.chars().count(), "[s] ".len() + MAX_DESCRIPTION_CHARS + 1);
    }
}
