//! Lean JSON Schemas for tool arguments: schemars output stripped of what models don't need
//! (feature `schema`), shared by every crate that defines tools.

use crate::ToolSpec;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// Builds the spec of a tool whose arguments are `Arguments`. The doc comment on the
/// arguments struct becomes the tool description; field doc comments describe the fields.
pub fn spec_for<Arguments: JsonSchema>(name: &str) -> ToolSpec {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    let mut parameters = generator.into_root_schema_for::<Arguments>().to_value();
    let description = match parameters.as_object_mut().and_then(|root| root.remove("description")) {
        Some(Value::String(text)) => text,
        _ => String::new(),
    };
    make_lean(&mut parameters);
    if let Some(root) = parameters.as_object_mut() {
        root.entry("properties").or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
    ToolSpec { name: name.to_owned(), description, parameters }
}

/// Removes keys that only add bytes (`$schema`, `title`, `format`, unsigned `minimum: 0`)
/// and turns `["integer", "null"]` types of optional fields into plain `"integer"`.
fn make_lean(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            object.remove("$schema");
            object.remove("title");
            object.remove("format");
            if object.get("minimum").and_then(Value::as_u64) == Some(0) {
                object.remove("minimum");
            }
            if let Some(Value::Array(types)) = object.get("type") {
                let non_null: Vec<Value> = types.iter().filter(|kind| kind.as_str() != Some("null")).cloned().collect();
                if non_null.len() == 1 {
                    object.insert("type".to_owned(), non_null[0].clone());
                }
            }
            if object.get("required").and_then(Value::as_array).is_some_and(Vec::is_empty) {
                object.remove("required");
            }
            for value in object.values_mut() {
                make_lean(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(make_lean),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads things.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// The path.
        path: String,
        /// How many.
        count: Option<u64>,
    }

    #[test]
    fn schema_is_lean() {
        let spec = spec_for::<Sample>("sample");
        assert_eq!(spec.description, "Reads things.");
        assert_eq!(
            spec.parameters,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The path."},
                    "count": {"type": "integer", "description": "How many."}
                },
                "required": ["path"]
            })
        );
    }
}
