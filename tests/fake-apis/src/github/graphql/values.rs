//! GraphQL values: literals and variables turned into JSON, and checked
//! against the input types of the schema subset.

use std::collections::HashMap;

use graphql_parser::query::{Type, Value as Gql};
use serde_json::{Map, Number, Value};

use crate::github::graphql::schema::{input_fields, is_leaf};

/// A type in SDL notation (`[String!]!`).
pub(crate) fn type_string(t: &Type<'static, String>) -> String {
    match t {
        Type::NamedType(name) => name.clone(),
        Type::ListType(inner) => format!("[{}]", type_string(inner)),
        Type::NonNullType(inner) => format!("{}!", type_string(inner)),
    }
}

/// A literal or variable as JSON, with variables substituted (an absent
/// variable is null).
pub(crate) fn to_json(value: &Gql<'static, String>, vars: &Map<String, Value>) -> Value {
    match value {
        Gql::Variable(name) => vars.get(name).cloned().unwrap_or(Value::Null),
        Gql::Int(n) => n.as_i64().map_or(Value::Null, Value::from),
        Gql::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Gql::String(s) => Value::String(s.clone()),
        Gql::Boolean(b) => Value::Bool(*b),
        Gql::Null => Value::Null,
        Gql::Enum(e) => Value::String(e.clone()),
        Gql::List(items) => Value::Array(items.iter().map(|v| to_json(v, vars)).collect()),
        Gql::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_json(v, vars)))
                .collect(),
        ),
    }
}

/// Checks a JSON value (a variable's) against an input type; the error
/// explains the problem as GitHub's `problems[].explanation` does.
pub(crate) fn check_json(value: &Value, ty: &str) -> Result<(), String> {
    if let Some(inner) = ty.strip_suffix('!') {
        if value.is_null() {
            return Err("Expected value to not be null".to_owned());
        }
        return check_json(value, inner);
    }
    if value.is_null() {
        return Ok(());
    }
    if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return match value {
            Value::Array(items) => items.iter().try_for_each(|v| check_json(v, inner)),
            // A single value is coerced to a one-item list.
            other => check_json(other, inner),
        };
    }
    let ok = match ty {
        "String" | "GitObjectID" | "DateTime" | "URI" => value.is_string(),
        "ID" => value.is_string() || value.is_i64(),
        "Int" => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        "Boolean" => value.is_boolean(),
        _ => {
            let Some(fields) = input_fields(ty) else {
                return Err(format!("{ty} isn't a defined input type"));
            };
            let Value::Object(map) = value else {
                return Err(format!("Expected {value} to be a key-value object."));
            };
            if let Some(extra) = map.keys().find(|k| !fields.iter().any(|(n, _)| n == k)) {
                return Err(format!("Field is not defined on {ty}: {extra}"));
            }
            for (name, field_ty) in fields {
                let v = map.get(*name).unwrap_or(&Value::Null);
                check_json(v, field_ty).map_err(|e| format!("{name}: {e}"))?;
            }
            return Ok(());
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("Could not coerce value {value} to {ty}"))
    }
}

/// Whether a variable of type `var` may be used where `arg` is expected.
pub(crate) fn compatible(var: &str, arg: &str) -> bool {
    match (var.strip_suffix('!'), arg.strip_suffix('!')) {
        (Some(v), Some(a)) => compatible(v, a),
        (Some(v), None) => compatible(v, arg),
        (None, Some(_)) => false,
        (None, None) => match (
            var.strip_prefix('[').and_then(|t| t.strip_suffix(']')),
            arg.strip_prefix('[').and_then(|t| t.strip_suffix(']')),
        ) {
            (Some(v), Some(a)) => compatible(v, a),
            (None, None) => var == arg,
            _ => false,
        },
    }
}

/// What is wrong with an argument's value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A literal of the wrong type.
    Literal,
    /// A variable of an incompatible type: (variable's type).
    Variable(String),
    /// A variable the operation does not declare.
    Undeclared(String),
}

/// Checks a literal (which may contain variables) against an input type.
pub(crate) fn check_literal(
    value: &Gql<'static, String>,
    ty: &str,
    var_types: &HashMap<String, String>,
) -> Result<(), Problem> {
    if let Gql::Variable(name) = value {
        let Some(var_ty) = var_types.get(name) else {
            return Err(Problem::Undeclared(name.clone()));
        };
        return if compatible(var_ty, ty) {
            Ok(())
        } else {
            Err(Problem::Variable(var_ty.clone()))
        };
    }
    if let Some(inner) = ty.strip_suffix('!') {
        if matches!(value, Gql::Null) {
            return Err(Problem::Literal);
        }
        return check_literal(value, inner, var_types);
    }
    if matches!(value, Gql::Null) {
        return Ok(());
    }
    if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return match value {
            Gql::List(items) => items
                .iter()
                .try_for_each(|v| check_literal(v, inner, var_types)),
            other => check_literal(other, inner, var_types),
        };
    }
    let ok = match (ty, value) {
        ("String" | "GitObjectID" | "DateTime" | "URI", Gql::String(_)) => true,
        ("ID", Gql::String(_) | Gql::Int(_)) => true,
        ("Int", Gql::Int(n)) => n.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        ("Boolean", Gql::Boolean(_)) => true,
        (_, Gql::Object(map)) if !is_leaf(ty) => {
            let Some(fields) = input_fields(ty) else {
                return Err(Problem::Literal);
            };
            if map.keys().any(|k| !fields.iter().any(|(n, _)| n == k)) {
                return Err(Problem::Literal);
            }
            for (name, field_ty) in fields {
                match map.get(*name) {
                    Some(v) => check_literal(v, field_ty, var_types)?,
                    None if field_ty.ends_with('!') => return Err(Problem::Literal),
                    None => {}
                }
            }
            true
        }
        _ => false,
    };
    if ok { Ok(()) } else { Err(Problem::Literal) }
}

/// The variables a value mentions.
pub(crate) fn variables_in(value: &Gql<'static, String>, into: &mut Vec<String>) {
    match value {
        Gql::Variable(name) => into.push(name.clone()),
        Gql::List(items) => items.iter().for_each(|v| variables_in(v, into)),
        Gql::Object(map) => map.values().for_each(|v| variables_in(v, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn variables_are_checked_against_input_types() {
        assert!(check_json(&json!("o"), "String!").is_ok());
        assert!(check_json(&json!(null), "String!").is_err());
        assert!(check_json(&json!(null), "String").is_ok());
        assert!(check_json(&json!(7), "Int!").is_ok());
        assert!(check_json(&json!("7"), "Int!").is_err());
        assert!(check_json(&json!(1u64 << 40), "Int").is_err());
        assert!(check_json(&json!(7), "ID!").is_ok());
        assert!(
            check_json(
                &json!({"pullRequestId": "PR_1"}),
                "MarkPullRequestReadyForReviewInput!"
            )
            .is_ok()
        );
        assert!(check_json(&json!({}), "MarkPullRequestReadyForReviewInput!").is_err());
        assert!(
            check_json(
                &json!({"pullRequestId": "x", "y": 1}),
                "MarkPullRequestReadyForReviewInput"
            )
            .is_err()
        );
        assert!(check_json(&json!("x"), "Nope").is_err());
    }

    #[test]
    fn variable_types_must_fit_arguments() {
        assert!(compatible("Int!", "Int!"));
        assert!(compatible("Int!", "Int"));
        assert!(!compatible("Int", "Int!"));
        assert!(!compatible("String!", "Int!"));
        assert!(compatible("[String!]!", "[String]"));
    }
}
