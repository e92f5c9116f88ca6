//! The shape of a machine's graph: the states no workflow can enter, and
//! the states from which no declared path leads to rest. The derive refuses
//! both unless allowed; the diagrams mark them.

use crate::diagram::engine_edges;
use crate::{machine::FailedSpecChange, machine::Machine, machine::SpecChange, machine::StateMeta};

impl Machine {
    /// The states no workflow can enter, in declaration order: not the
    /// initial state, not the `goto` target of `on_spec_change`, not the
    /// default failed state (which every machine must have), and not a
    /// target of any edge the diagram draws (`next`, signals, `timeout`,
    /// retries `exhausted`, `fail`) out of a state that can be entered.
    ///
    /// ```
    /// use fsm_core::{Machine, StateMeta};
    ///
    /// static STATES: [StateMeta; 4] = [
    ///     StateMeta::new("Start").initial().with_handler().next(&["Done"]),
    ///     StateMeta::new("Orphan").with_handler().next(&["Done"]),
    ///     StateMeta::new("Done").final_state(),
    ///     StateMeta::new("Failed").failed(),
    /// ];
    /// assert_eq!(Machine::new("Job", &STATES).unreachable_states(), ["Orphan"]);
    /// ```
    pub fn unreachable_states(&self) -> Vec<&'static str> {
        let mut seen: Vec<&'static str> = Vec::new();
        let mut queue: Vec<&'static str> = self
            .initial_state()
            .map(StateMeta::name)
            .into_iter()
            .collect();
        if let SpecChange::Goto(target) = self.spec_change() {
            queue.push(target);
        }
        // Entered from a failed state, which is always reachable.
        if let FailedSpecChange::Goto(target) = self.failed_spec_change() {
            queue.push(target);
        }
        // Every machine must have it, even one whose states cannot fail.
        queue.extend(self.default_failed().map(StateMeta::name));
        while let Some(name) = queue.pop() {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let Some(state) = self.state(name) else {
                continue;
            };
            queue.extend(state.targets());
            queue.extend(state.signals().iter().map(|(_, target)| *target));
            queue.extend(engine_edges(self, state).into_iter().map(|(to, _)| to));
        }
        self.states()
            .iter()
            .map(StateMeta::name)
            .filter(|name| !seen.contains(name))
            .collect()
    }

    /// The states from which no path of declared transitions (`next`,
    /// signals, `on_timeout`, `on_exhausted`) reaches a state where the machine
    /// rests (`ready`, `final` or `failed`), in declaration order: a
    /// workflow there can only loop, or end by failing.
    ///
    /// ```
    /// use fsm_core::{Machine, StateMeta};
    ///
    /// static STATES: [StateMeta; 4] = [
    ///     StateMeta::new("Ping").initial().with_handler().next(&["Pong"]),
    ///     StateMeta::new("Pong").with_handler().next(&["Ping"]),
    ///     StateMeta::new("Done").final_state(),
    ///     StateMeta::new("Failed").failed(),
    /// ];
    /// assert_eq!(Machine::new("Loop", &STATES).states_that_never_rest(), ["Ping", "Pong"]);
    /// ```
    pub fn states_that_never_rest(&self) -> Vec<&'static str> {
        let declared = |s: &StateMeta| -> Vec<&'static str> {
            let mut out = s.targets().to_vec();
            out.extend(s.timeout_target());
            out.extend(s.exhausted_target());
            out.extend(s.signals().iter().map(|(_, target)| *target));
            out
        };
        let mut rests: Vec<&'static str> = self
            .states()
            .iter()
            .filter(|s| s.is_resting() || s.is_ready())
            .map(StateMeta::name)
            .collect();
        loop {
            let before = rests.len();
            for s in self.states() {
                if !rests.contains(&s.name()) && declared(s).iter().any(|t| rests.contains(t)) {
                    rests.push(s.name());
                }
            }
            if rests.len() == before {
                break;
            }
        }
        self.states()
            .iter()
            .map(StateMeta::name)
            .filter(|name| !rests.contains(name))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{machine::Machine, machine::SpecChange, machine::StateMeta};

    static STATES: [StateMeta; 7] = [
        StateMeta::new("Start")
            .initial()
            .with_handler()
            .next(&["Work"]),
        StateMeta::new("Work")
            .with_handler()
            .timeout(Duration::from_secs(5))
            .on_timeout("Parked")
            .next(&["Loop"]),
        StateMeta::new("Loop").with_handler().next(&["Work"]),
        StateMeta::new("Parked").final_state(),
        StateMeta::new("Reset").with_handler().next(&["Start"]),
        StateMeta::new("Orphan").final_state(),
        StateMeta::new("Failed").failed(),
    ];

    #[test]
    fn engine_edges_and_the_spec_change_target_make_states_reachable() {
        let machine = Machine::new("M", &STATES);
        // Parked only through `on_timeout`, Failed only through `fail`.
        assert_eq!(machine.unreachable_states(), ["Reset", "Orphan"]);
        let with_goto = machine.on_spec_change(SpecChange::Goto("Reset"));
        assert_eq!(with_goto.unreachable_states(), ["Orphan"]);
    }

    #[test]
    fn the_default_failed_state_is_reachable_even_where_nothing_can_fail() {
        static RESTING: [StateMeta; 3] = [
            StateMeta::new("Done").initial().final_state().ready(),
            StateMeta::new("Failed").failed(),
            StateMeta::new("Cancelled").failed(),
        ];
        let machine = Machine::new("M", &RESTING).on_failure("Failed");
        assert_eq!(machine.unreachable_states(), ["Cancelled"]);
    }

    #[test]
    fn declared_edges_to_a_resting_state_count_and_failure_does_not() {
        let machine = Machine::new("M", &STATES);
        // Loop reaches Parked through Work's `on_timeout`.
        assert!(machine.states_that_never_rest().is_empty());
        static RESTLESS: [StateMeta; 4] = [
            StateMeta::new("Start")
                .initial()
                .with_handler()
                .next(&["Poll"]),
            StateMeta::new("Poll").with_handler().next(&["Poll"]),
            StateMeta::new("Serving")
                .ready()
                .with_handler()
                .next(&["Start"]),
            StateMeta::new("Failed").failed(),
        ];
        // A ready state rests even with a handler; Start and Poll end only
        // by failing.
        assert_eq!(
            Machine::new("R", &RESTLESS).states_that_never_rest(),
            ["Start", "Poll"]
        );
    }
}
