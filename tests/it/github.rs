//! The GitHub client against the strict fake GitHub.
