//! Which fields a selection set selects on a type: fragment spreads and
//! inline fragments expanded, `@include`/`@skip` applied.

use std::collections::{BTreeSet, HashMap};

use graphql_parser::Pos;
use graphql_parser::query::{
    Directive, Field, FragmentDefinition, Selection, SelectionSet, TypeCondition,
};
use serde_json::{Map, Value};

use crate::github::graphql::error;
use crate::github::graphql::schema::applies;
use crate::github::graphql::values::to_json;

/// A field of the parsed query.
pub(crate) type GField = Field<'static, String>;
/// A selection set of the parsed query.
pub(crate) type GSet = SelectionSet<'static, String>;

/// Fragment spreads nested deeper than this are taken for a cycle.
const MAX_DEPTH: usize = 24;

/// The named fragments of a document, and which ones were spread.
pub(crate) struct Fragments<'d> {
    pub map: HashMap<&'d str, &'d FragmentDefinition<'static, String>>,
    pub used: BTreeSet<String>,
}

/// Expands a selection set into its fields, in order, each with the type
/// it is selected on: `type_name`, or a fragment's narrower type condition
/// (`... on PullRequestReviewThread` inside `node`, whose type is `Node`).
/// Problems (unknown fragments or directives, impossible spreads, cycles)
/// are added to `errors`.
pub(crate) fn collect<'d>(
    type_name: &str,
    set: &'d GSet,
    fragments: &mut Fragments<'d>,
    vars: &Map<String, Value>,
    errors: &mut Vec<Value>,
) -> Vec<(String, &'d GField)> {
    let mut out = Vec::new();
    collect_into(type_name, set, fragments, vars, errors, 0, &mut out);
    out
}

/// The type a fragment on `condition` selects on inside `type_name`: the
/// condition where it is narrower (an object type inside an interface).
fn narrowed(condition: &str, type_name: &str) -> String {
    if matches!(type_name, "Node" | "Actor") && !matches!(condition, "Node" | "Actor") {
        condition.to_owned()
    } else {
        type_name.to_owned()
    }
}

fn collect_into<'d>(
    type_name: &str,
    set: &'d GSet,
    fragments: &mut Fragments<'d>,
    vars: &Map<String, Value>,
    errors: &mut Vec<Value>,
    depth: usize,
    out: &mut Vec<(String, &'d GField)>,
) {
    for selection in &set.items {
        match selection {
            Selection::Field(f) => {
                if included(&f.directives, vars, errors) {
                    out.push((type_name.to_owned(), f));
                }
            }
            Selection::InlineFragment(inline) => {
                if !included(&inline.directives, vars, errors) {
                    continue;
                }
                let on = match &inline.type_condition {
                    Some(TypeCondition::On(condition)) => {
                        if !spread_ok(condition, type_name, inline.position, errors) {
                            continue;
                        }
                        narrowed(condition, type_name)
                    }
                    None => type_name.to_owned(),
                };
                collect_into(
                    &on,
                    &inline.selection_set,
                    fragments,
                    vars,
                    errors,
                    depth + 1,
                    out,
                );
            }
            Selection::FragmentSpread(spread) => {
                if !included(&spread.directives, vars, errors) {
                    continue;
                }
                let name = spread.fragment_name.as_str();
                fragments.used.insert(name.to_owned());
                let Some(fragment) = fragments.map.get(name).copied() else {
                    errors.push(error(
                        format!("Fragment {name} was used, but not defined"),
                        spread.position,
                        None,
                    ));
                    continue;
                };
                if depth >= MAX_DEPTH {
                    errors.push(error(
                        format!("Fragment {name} contains an infinite loop"),
                        spread.position,
                        None,
                    ));
                    continue;
                }
                let TypeCondition::On(condition) = &fragment.type_condition;
                if spread_ok(condition, type_name, spread.position, errors) {
                    collect_into(
                        &narrowed(condition, type_name),
                        &fragment.selection_set,
                        fragments,
                        vars,
                        errors,
                        depth + 1,
                        out,
                    );
                }
            }
        }
    }
}

fn spread_ok(condition: &str, type_name: &str, pos: Pos, errors: &mut Vec<Value>) -> bool {
    if applies(condition, type_name) {
        return true;
    }
    errors.push(error(
        format!("Fragment on {condition} can't be spread inside {type_name}"),
        pos,
        None,
    ));
    false
}

/// Applies `@include(if:)` and `@skip(if:)`; any other directive is unknown.
fn included(
    directives: &[Directive<'static, String>],
    vars: &Map<String, Value>,
    errors: &mut Vec<Value>,
) -> bool {
    let mut keep = true;
    for d in directives {
        let condition = d
            .arguments
            .iter()
            .find(|(name, _)| name == "if")
            .map(|(_, v)| to_json(v, vars));
        match (d.name.as_str(), condition) {
            ("include", Some(Value::Bool(b))) => keep &= b,
            ("skip", Some(Value::Bool(b))) => keep &= !b,
            ("include" | "skip", _) => errors.push(error(
                format!("Directive @{} requires a Boolean `if` argument", d.name),
                d.position,
                None,
            )),
            (other, _) => errors.push(error(
                format!("Directive @{other} is not defined"),
                d.position,
                None,
            )),
        }
    }
    keep
}
