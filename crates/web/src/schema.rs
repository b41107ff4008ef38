//! Tool specs from argument structs: the schemars schema, stripped of what models don't
//! need, with the struct's doc comment as the tool description. (The file tools keep
//! their own copy: adapters don't depend on each other.)

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;
use squidbot_types::ToolSpec;

/// The spec of tool `name` taking `Arguments`.
pub(crate) fn spec_for<Arguments: JsonSchema>(name: &str) -> ToolSpec {
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
    strip(&mut parameters);
    ToolSpec { name: name.to_owned(), description, parameters }
}

/// Drops `$schema`, `title`, `format` and `minimum: 0`, and reads `["integer", "null"]`
/// (an optional field) as plain `"integer"`.
fn strip(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            for key in ["$schema", "title", "format"] {
                object.remove(key);
            }
            if object.get("minimum").and_then(Value::as_u64) == Some(0) {
                object.remove("minimum");
            }
            if let Some(Value::Array(types)) = object.get("type") {
                let concrete: Vec<&Value> = types.iter().filter(|kind| kind.as_str() != Some("null")).collect();
                if let [only] = concrete.as_slice() {
                    let only = (*only).clone();
                    object.insert("type".to_owned(), only);
                }
            }
            object.values_mut().for_each(strip);
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Does a thing.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// The target.
        target: String,
        /// How many.
        count: Option<u32>,
    }

    #[test]
    fn specs_are_lean() {
        let spec = spec_for::<Sample>("sample");
        assert_eq!(spec.description, "Does a thing.");
        assert_eq!(
            spec.parameters,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "target": {"type": "string", "description": "The target."},
                    "count": {"type": "integer", "description": "How many."}
                },
                "required": ["target"]
            })
        );
    }
}
