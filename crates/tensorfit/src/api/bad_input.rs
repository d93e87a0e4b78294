//! [`BadInput`]: what was wrong with the input of a call, as fields.

use std::fmt;

/// What was wrong with the input of a front-door call: the argument at fault, what it must
/// be and what it was, where one argument is at fault; always the whole message (what
/// `Display` prints).
///
/// ```
/// use tensorfit::{Error, Sequences};
/// match Sequences::new(vec![], vec![], 3) {
///     Err(Error::BadInput(b)) => {
///         assert_eq!(b.argument.as_deref(), Some("inputs"));
///         assert_eq!(b.given.as_deref(), Some("no sequences"));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BadInput {
    /// The argument or setting at fault, as the call names it (`inputs`, `labels`,
    /// `features`, `x`, `batch`, `margin`, `model`); `None` where the check spans several
    /// (a shape against the plan) or comes from deeper in the engine.
    pub argument: Option<String>,
    /// What it must be.
    pub expected: Option<String>,
    /// What was given.
    pub given: Option<String>,
    /// The whole message, naming what is wrong and how to mend it.
    pub message: String,
}

impl BadInput {
    /// Bad input described by `message` alone (an app's own check, or one from deeper in
    /// the engine).
    ///
    /// ```
    /// use tensorfit::{BadInput, Error};
    /// let b = BadInput::new("the vocabulary file is empty");
    /// assert_eq!(b.argument, None);
    /// assert_eq!(b.to_string(), "the vocabulary file is empty");
    /// assert_eq!(Error::BadInput(b).to_string(), "bad input: the vocabulary file is empty");
    /// ```
    pub fn new(message: impl Into<String>) -> BadInput {
        BadInput {
            argument: None,
            expected: None,
            given: None,
            message: message.into(),
        }
    }

    /// `argument` should be `expected` and was `given`; `message` says it for people.
    ///
    /// ```
    /// use tensorfit::BadInput;
    /// let b = BadInput::of("batch", "at least 1", "0", "a batch needs at least one sequence");
    /// assert_eq!(b.argument.as_deref(), Some("batch"));
    /// assert_eq!((b.expected.as_deref(), b.given.as_deref()), (Some("at least 1"), Some("0")));
    /// assert_eq!(b.to_string(), "a batch needs at least one sequence");
    /// ```
    pub fn of(
        argument: &str,
        expected: impl Into<String>,
        given: impl Into<String>,
        message: impl Into<String>,
    ) -> BadInput {
        BadInput {
            argument: Some(argument.to_string()),
            expected: Some(expected.into()),
            given: Some(given.into()),
            message: message.into(),
        }
    }
}

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for BadInput {
    fn from(message: String) -> BadInput {
        BadInput::new(message)
    }
}

impl From<&str> for BadInput {
    fn from(message: &str) -> BadInput {
        BadInput::new(message)
    }
}
