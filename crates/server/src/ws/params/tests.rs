//! The params reader: fields in declaration order, `null` as absent, unknown keys ignored,
//! refusals that name the field, and the wire types' rules.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Count, Fraction, Lenient, NonBlank, ParamsError, decode};

fn object(params: Value) -> Map<String, Value> {
    match params {
        Value::Object(params) => params,
        other => panic!("params must be an object: {other}"),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sample {
    session_key: Option<String>,
    name: NonBlank,
    limit: Option<Count>,
    flags: Option<Vec<bool>>,
    nested: Option<Inner>,
}

#[derive(Debug, Deserialize)]
struct Inner {
    depth: u64,
    label: Option<String>,
}

fn refused(params: Value) -> String {
    match decode::<Sample>(object(params.clone())) {
        Ok(sample) => panic!("{params} was read as {sample:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn fields_are_read_by_wire_name_and_unknown_keys_ignored() {
    let params = json!({
        "sessionKey": "s", "name": " n ", "limit": 7, "flags": [true, false],
        "nested": {"depth": 2, "label": null, "extra": 1}, "unknown": {"any": [1]},
    });
    let sample: Sample = decode(object(params)).unwrap();
    assert_eq!(sample.session_key.as_deref(), Some("s"));
    assert_eq!(sample.name.as_str(), " n ", "kept as sent");
    assert_eq!(sample.limit, Some(Count(7)));
    assert_eq!(sample.flags, Some(vec![true, false]));
    let nested = sample.nested.unwrap();
    assert_eq!((nested.depth, nested.label), (2, None));
}

#[test]
fn null_reads_as_absent() {
    let sample: Sample =
        decode(object(json!({"sessionKey": null, "name": "n", "limit": null, "flags": null, "nested": null}))).unwrap();
    assert!(sample.session_key.is_none() && sample.limit.is_none() && sample.flags.is_none());
    assert_eq!(refused(json!({"name": null})), "`name` is required and must be a non-empty string");
}

#[test]
fn refusals_name_the_field_and_say_what_it_must_be() {
    assert_eq!(refused(json!({"name": "n", "sessionKey": 1})), "`sessionKey` must be a string");
    assert_eq!(refused(json!({})), "`name` is required and must be a non-empty string");
    assert_eq!(refused(json!({"name": "\t"})), "`name` is required and must be a non-empty string");
    assert_eq!(refused(json!({"name": ["n"]})), "`name` must be a string");
    assert_eq!(refused(json!({"name": "n", "limit": "5"})), "`limit` must be a non-negative integer");
    assert_eq!(refused(json!({"name": "n", "limit": -5})), "`limit` must be a non-negative integer");
    assert_eq!(refused(json!({"name": "n", "limit": 5.0})), "`limit` must be a non-negative integer");
    assert_eq!(refused(json!({"name": "n", "flags": true})), "`flags` must be a sequence");
    assert_eq!(refused(json!({"name": "n", "flags": [1]})), "`flags` must be a boolean");
    assert_eq!(refused(json!({"name": "n", "nested": {}})), "`nested` needs `depth`");
    assert_eq!(refused(json!({"name": "n", "nested": {"depth": "deep"}})), "`nested` must be u64");
    assert!(matches!(
        decode::<Sample>(object(json!({"name": 1}))),
        Err(ParamsError::Field { field, .. }) if field == "name"
    ));
}

#[test]
fn fields_are_checked_in_the_order_the_struct_declares_them() {
    // `sessionKey` comes first in the struct although `limit` sorts first on the wire.
    assert_eq!(refused(json!({"limit": "x", "sessionKey": 1, "name": "n"})), "`sessionKey` must be a string");
    assert_eq!(refused(json!({"limit": "x"})), "`name` is required and must be a non-empty string");
}

#[test]
fn fractions_are_numbers_from_zero_to_one() {
    #[derive(Debug, Deserialize)]
    struct Weighted {
        weight: Option<Fraction>,
    }
    for (weight, expected) in [(json!(0), Some(0.0)), (json!(1), Some(1.0)), (json!(0.25), Some(0.25))] {
        let weighted: Weighted = decode(object(json!({"weight": weight}))).unwrap();
        assert_eq!(weighted.weight.map(|weight| weight.0), expected);
    }
    for weight in [json!(-0.1), json!(1.01), json!("0.5"), json!([0.5])] {
        let error = decode::<Weighted>(object(json!({"weight": weight}))).unwrap_err();
        assert_eq!(error.to_string(), "`weight` must be a number from 0 to 1");
    }
}

#[test]
fn lenient_fields_read_a_value_of_the_wrong_type_as_absent() {
    #[derive(Debug, Deserialize)]
    struct Loose {
        version: Lenient<u64>,
        names: Lenient<Vec<Lenient<String>>>,
    }
    let loose: Loose = decode(object(json!({"version": "4", "names": ["a", 1, null, "b"]}))).unwrap();
    assert_eq!(loose.version.0, None);
    let names: Vec<String> = loose.names.0.unwrap().into_iter().filter_map(|name| name.0).collect();
    assert_eq!(names, ["a", "b"]);
    let loose: Loose = decode(object(json!({"version": 4, "names": "a"}))).unwrap();
    assert_eq!((loose.version.0, loose.names.0), (Some(4), None));
    let loose: Loose = decode(Map::new()).unwrap();
    assert_eq!((loose.version.0, loose.names.0), (None, None));
}
