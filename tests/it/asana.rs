//! The Asana client against the strict fake Asana.
