//! Confinement: what holds a worker inside its run. The sandbox (the
//! kernel's namespaces, Landlock, mounts and limits, set up before the
//! worker's program starts) and the egress proxy, a worker's only way to the
//! network.

pub mod egress;
pub mod sandbox;
