//! Reading a request's `params` object into the typed struct of its method. The struct's
//! fields are read in the order it declares them, a field that is absent or `null` counts
//! as missing, keys it does not declare are ignored (clients send more than we read), and a
//! refusal names the field: "`limit` must be a non-negative integer".

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::frame::MethodError;

/// Why a request's params were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParamsError {
    /// One field is missing or has the wrong type or value.
    #[error("`{field}` {problem}")]
    Field {
        /// The field's wire name.
        field: String,
        /// What is wrong with it, e.g. "must be a string".
        problem: String,
    },
    /// The params as a whole could not be read.
    #[error("can't read the params: {0}")]
    Whole(String),
}

impl de::Error for ParamsError {
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        Self::Whole(message.to_string())
    }
}

impl From<ParamsError> for MethodError {
    fn from(error: ParamsError) -> Self {
        MethodError::invalid(error.to_string())
    }
}

/// Reads `params` into `T`, a struct deriving `Deserialize`.
pub(crate) fn decode<T: DeserializeOwned>(params: Map<String, Value>) -> Result<T, ParamsError> {
    T::deserialize(Params(params))
}

/// What is wrong with one field's value; [`Fields`] adds the field's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Problem(String);

impl de::Error for Problem {
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        Self(message.to_string())
    }

    fn invalid_type(_unexpected: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self(format!("must be {expected}"))
    }

    fn invalid_value(_unexpected: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self(format!("must be {expected}"))
    }

    fn missing_field(field: &'static str) -> Self {
        Self(format!("needs `{field}`"))
    }
}

/// The params object as a deserializer: a struct reads the fields it declares.
struct Params(Map<String, Value>);

impl<'de> de::Deserializer<'de> for Params {
    type Error = ParamsError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamsError> {
        let entries: Vec<(String, Option<Value>)> =
            self.0.into_iter().map(|(key, value)| (key, Some(value).filter(|value| !value.is_null()))).collect();
        visitor.visit_map(Fields { entries: entries.into_iter(), value: None })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        mut self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ParamsError> {
        let entries: Vec<(String, Option<Value>)> = fields
            .iter()
            .map(|field| ((*field).to_owned(), self.0.remove(*field).filter(|value| !value.is_null())))
            .collect();
        visitor.visit_map(Fields { entries: entries.into_iter(), value: None })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// The fields being read, each with its value (`None` when missing).
struct Fields {
    entries: std::vec::IntoIter<(String, Option<Value>)>,
    /// The field whose key was just read.
    value: Option<(String, Option<Value>)>,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = ParamsError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ParamsError> {
        let Some((field, value)) = self.entries.next() else { return Ok(None) };
        let key = seed.deserialize(IntoDeserializer::<ParamsError>::into_deserializer(field.as_str()))?;
        self.value = Some((field, value));
        Ok(Some(key))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, ParamsError> {
        let Some((field, value)) = self.value.take() else {
            return Err(ParamsError::Whole("a value was asked for before its key".to_owned()));
        };
        seed.deserialize(FieldValue(value)).map_err(|problem| ParamsError::Field { field, problem: problem.0 })
    }
}

/// One value: `None` for a missing field, which reads as `None` into an `Option` and is
/// refused as required by anything else.
struct FieldValue(Option<Value>);

impl<'de> IntoDeserializer<'de, Problem> for FieldValue {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for FieldValue {
    type Error = Problem;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        let Some(value) = self.0 else { return Err(Problem("is required".to_owned())) };
        match value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(flag) => visitor.visit_bool(flag),
            Value::Number(number) => {
                if let Some(number) = number.as_u64() {
                    visitor.visit_u64(number)
                } else if let Some(number) = number.as_i64() {
                    visitor.visit_i64(number)
                } else {
                    match number.as_f64() {
                        Some(number) => visitor.visit_f64(number),
                        None => Err(Problem(format!("holds the number {number}, which can't be read"))),
                    }
                }
            }
            Value::String(text) => visitor.visit_string(text),
            Value::Array(items) => {
                de::value::SeqDeserializer::new(items.into_iter().map(|item| FieldValue(Some(item))))
                    .deserialize_any(visitor)
            }
            Value::Object(entries) => {
                de::value::MapDeserializer::new(entries.into_iter().map(|(key, value)| (key, FieldValue(Some(value)))))
                    .deserialize_any(visitor)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            None | Some(Value::Null) => visitor.visit_none(),
            Some(value) => visitor.visit_some(FieldValue(Some(value))),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Problem> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// Params of a method that reads none (whatever the client sends is ignored).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct NoParams {}

/// A required string that is not blank; kept as sent (untrimmed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NonBlank(pub(crate) String);

impl NonBlank {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for NonBlank {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .filter(|text| !text.trim().is_empty())
            .map(Self)
            .ok_or_else(|| de::Error::custom("is required and must be a non-empty string"))
    }
}

/// A non-negative integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Count(pub(crate) u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        u64::deserialize(deserializer).map(Self).map_err(|_| de::Error::custom("must be a non-negative integer"))
    }
}

/// A number from 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fraction(pub(crate) f64);

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match f64::deserialize(deserializer) {
            Ok(number) if (0.0..=1.0).contains(&number) => Ok(Self(number)),
            _ => Err(de::Error::custom("must be a number from 0 to 1")),
        }
    }
}

/// A field read leniently: a value of the wrong type reads as absent. For `connect`, whose
/// fields clients fill in many ways and which has never been refused for a mistyped one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lenient<T>(pub(crate) Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Option::<Value>::deserialize(deserializer)?;
        Ok(Self(value.and_then(|value| T::deserialize(value).ok())))
    }
}

#[cfg(test)]
mod tests;
