//! Commands delivered through the object: the `operator-fsm.io/commands`
//! annotation holds a JSON list of [`Command`]s, numbered; `kubectl fsm
//! pause|resume|retry|goto|signal` appends to it (and prunes the commands
//! the machine has taken). The engine takes each command numbered above
//! the record's `commandSeq` once, in order (see
//! [`fsm_core::Command`]).
//!
//! ```
//! use fsm_kube::records::{COMMANDS_ANNOTATION, read_commands};
//! use kube::api::ObjectMeta;
//!
//! let mut meta = ObjectMeta::default();
//! meta.annotations = Some([(
//!     COMMANDS_ANNOTATION.to_owned(),
//!     r#"[{"seq": 1, "command": "pause", "by": "alice"}]"#.to_owned(),
//! )].into());
//! let commands = read_commands(&meta).unwrap();
//! assert_eq!(commands[0].to_string(), "pause");
//! ```

use fsm_core::{Command, CommandListError};
use kube::api::ObjectMeta;

/// The annotation that carries an object's commands.
pub const COMMANDS_ANNOTATION: &str = "operator-fsm.io/commands";

/// The commands `meta` carries, in order of sequence number; none when it
/// has no such annotation.
///
/// # Errors
/// [`CommandListError`] for an annotation that is not a valid list: none
/// of it is applied, and the runtime says so with a `CommandsUnreadable`
/// event.
pub fn read_commands(meta: &ObjectMeta) -> Result<Vec<Command>, CommandListError> {
    match meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMMANDS_ANNOTATION))
    {
        Some(text) => Command::parse_list(text),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(text: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some([(COMMANDS_ANNOTATION.to_owned(), text.to_owned())].into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_object_without_the_annotation_carries_no_commands() {
        assert_eq!(read_commands(&ObjectMeta::default()), Ok(Vec::new()));
    }

    #[test]
    fn a_malformed_annotation_is_an_error_not_an_empty_list() {
        let error = read_commands(&meta("pause please")).unwrap_err();
        assert!(matches!(error, CommandListError::Malformed(_)), "{error}");
    }
}
