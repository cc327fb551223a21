//! Faults waiting for requests: the next N requests on a route get a fault
//! instead of (or, for "accept then hang", after) their normal handling.

/// Pending faults, in the order they were injected.
#[derive(Debug)]
pub(crate) struct Faults<R, F> {
    pending: Vec<(R, F, usize)>,
}

impl<R, F> Default for Faults<R, F> {
    fn default() -> Self {
        Faults {
            pending: Vec::new(),
        }
    }
}

impl<R: Copy, F: Copy> Faults<R, F> {
    /// Adds a fault for the next `times` matching requests.
    pub fn inject(&mut self, route: R, fault: F, times: usize) {
        if times > 0 {
            self.pending.push((route, fault, times));
        }
    }

    /// Takes one use of the oldest fault whose route matches.
    pub fn take(&mut self, matches: impl Fn(R) -> bool) -> Option<F> {
        let index = self.pending.iter().position(|(r, _, _)| matches(*r))?;
        let entry = &mut self.pending[index];
        entry.2 -= 1;
        let fault = entry.1;
        if entry.2 == 0 {
            self.pending.remove(index);
        }
        Some(fault)
    }
}
