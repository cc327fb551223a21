//! Which platform a task is for ("macos", "windows", …), which the filters
//! compare with the profile's platform. Teams record it differently: some in
//! a custom field, some as a tag, so both are configurable and the field
//! wins when it has a value.

use crate::ground::text::eq_fold;

/// One custom field value of a task, as Asana displays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomFieldValue {
    /// The field's name (e.g. `Platform`).
    pub name: String,
    /// Its `display_value`: Asana's read-only text form of any field type;
    /// `None` when unset.
    pub display_value: Option<String>,
}

/// How a task's platform is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlatformRule {
    /// The custom field whose value names the platform, matched by name
    /// without regard to case. `None`: tags only.
    pub field: Option<String>,
    /// Tags that name a platform (e.g. `macOS`, `Windows`), matched without
    /// regard to case, in this order of preference; used when the field is
    /// not configured, absent from the task or empty.
    pub tags: Vec<String>,
}

impl PlatformRule {
    /// The platform, lower-cased and trimmed: the configured field's
    /// display value if it has one, else the first configured platform tag
    /// the task carries. `None` when neither says.
    pub fn platform(&self, fields: &[CustomFieldValue], tags: &[String]) -> Option<String> {
        let from_field = self.field.as_deref().and_then(|wanted| {
            fields
                .iter()
                .filter(|f| eq_fold(f.name.trim(), wanted.trim()))
                .filter_map(|f| f.display_value.as_deref())
                .map(str::trim)
                .find(|v| !v.is_empty())
        });
        let from_tags = || {
            self.tags
                .iter()
                .map(|t| t.trim())
                .find(|wanted| tags.iter().any(|t| eq_fold(t.trim(), wanted)))
        };
        from_field.or_else(from_tags).map(str::to_lowercase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, value: Option<&str>) -> CustomFieldValue {
        CustomFieldValue {
            name: name.into(),
            display_value: value.map(Into::into),
        }
    }

    #[test]
    fn field_then_tags() {
        let rule = PlatformRule {
            field: Some("Platform".into()),
            tags: vec!["macOS".into(), "Windows".into()],
        };
        let no_field = PlatformRule {
            field: None,
            ..rule.clone()
        };
        let nothing = PlatformRule::default();
        let umlaut = PlatformRule {
            field: None,
            tags: vec!["Über".into()],
        };
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        #[rustfmt::skip]
        type Case<'a> = (&'a PlatformRule, Vec<CustomFieldValue>, Vec<String>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            // The field wins, lower-cased and trimmed.
            (
                &rule,
                vec![field("Platform", Some(" macOS "))],
                s(&["windows"]),
                Some("macos"),
            ),
            // Field names match without regard to case.
            (
                &rule,
                vec![field("platform", Some("Windows"))],
                vec![],
                Some("windows"),
            ),
            // An unset or blank field falls back to the tags.
            (
                &rule,
                vec![field("Platform", None)],
                s(&["bug", "MACOS"]),
                Some("macos"),
            ),
            (
                &rule,
                vec![field("Platform", Some("  "))],
                s(&["windows"]),
                Some("windows"),
            ),
            // Another field does not count.
            (&rule, vec![field("Team", Some("iOS"))], s(&["bug"]), None),
            // The configured order decides between two platform tags.
            (&rule, vec![], s(&["Windows", "macOS"]), Some("macos")),
            // Without a configured field, a field named Platform is ignored.
            (
                &no_field,
                vec![field("Platform", Some("Linux"))],
                s(&["windows"]),
                Some("windows"),
            ),
            (
                &nothing,
                vec![field("Platform", Some("Linux"))],
                s(&["macOS"]),
                None,
            ),
            // Unicode case folding.
            (&umlaut, vec![], s(&["über"]), Some("über")),
        ];
        for (rule, fields, tags, expected) in cases {
            assert_eq!(
                rule.platform(&fields, &tags).as_deref(),
                expected,
                "{rule:?} {fields:?} {tags:?}"
            );
        }
    }
}
