//! The label selector syntax, parsed the way kube-apiserver's own parser
//! parses it (a lexer of identifiers and operator symbols, then one
//! requirement after another), so that what the embedded server refuses,
//! and the words it refuses with, are the real server's: `a=b,` is
//! refused ("found '', expected: identifier after ','"), `a=(b)` says
//! what it found where it wanted an identifier, and so on.

use std::collections::BTreeSet;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, BTreeSet<String>),
    /// `key notin (a,b)` (also true when the key is absent).
    NotIn(String, BTreeSet<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    NotExists(String),
    /// `key>n`: the label is an integer greater than `n`.
    GreaterThan(String, i64),
    /// `key<n`: the label is an integer less than `n`.
    LessThan(String, i64),
}

/// What the lexer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    /// Never made by the symbols the lexer knows; kept for its message.
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The token a whole literal spells, if it is one.
fn keyword(literal: &str) -> Option<Token> {
    Some(match literal {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Reads a selector byte by byte; a NUL byte, like the end, ends a
/// literal.
struct Lexer<'s> {
    text: &'s str,
    pos: usize,
}

impl<'s> Lexer<'s> {
    fn read(&mut self) -> u8 {
        match self.text.as_bytes().get(self.pos) {
            Some(&c) => {
                self.pos += 1;
                c
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn lex(&mut self) -> (Token, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        if c == 0 {
            return (Token::End, String::new());
        }
        self.unread();
        if is_special(c) {
            self.symbol()
        } else {
            self.identifier_or_keyword()
        }
    }

    /// The longest run of symbol characters that spells a token.
    fn symbol(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut last: Option<(Token, usize)> = None;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if !is_special(c) {
                self.unread();
                break;
            }
            match keyword(&self.text[start..self.pos]) {
                Some(token) => last = Some((token, self.pos)),
                None if last.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        match last {
            Some((token, end)) => (token, self.text[start..end].to_owned()),
            None => (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    &self.text[start..self.pos]
                ),
            ),
        }
    }

    fn identifier_or_keyword(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut end = start;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special(c) || is_whitespace(c) {
                self.unread();
                break;
            }
            end = self.pos;
        }
        let literal = self.text[start..end].to_owned();
        (keyword(&literal).unwrap_or(Token::Identifier), literal)
    }
}

/// Where the parser reads: among values `in` and `notin` are plain
/// identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

/// A requirement's operator, as the parser names them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operator {
    Exists,
    DoesNotExist,
    Equals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

impl Parser {
    fn new(selector: &str) -> Self {
        let mut lexer = Lexer {
            text: selector,
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Token::End;
            items.push(item);
            if end {
                return Parser { items, position: 0 };
            }
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self
            .items
            .get(self.position)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .requirement()
                        .map_err(|why| format!("unable to parse requirement: {why}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if !matches!(next, Token::Identifier | Token::DoesNotExist) {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, operator) = self.key_and_inferred_operator()?;
        if let Some(operator) = operator {
            return new_requirement(key, operator, BTreeSet::new());
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, operator, values)
    }

    /// The key, and `Exists` or `DoesNotExist` when nothing but a comma
    /// or the end follows it.
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let mut operator = None;
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        key_problem(&literal)?;
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::End | Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: '=', '!=', '==', 'in', notin'"
                ));
            }
        })
    }

    /// `(a, b)`; `()` is the one empty value.
    fn values(&mut self) -> Result<BTreeSet<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.identifiers()?;
                let (token, _) = self.consume(Context::Values);
                if token != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    /// The values of a list up to its `)`; empty places (`(,a)`, `(a,)`,
    /// `(a,,b)`) are the empty value.
    fn identifiers(&mut self) -> Result<BTreeSet<String>, String> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    let (next, _) = self.lookahead(Context::Values);
                    if next == Token::ClosedPar {
                        values.insert(String::new());
                        return Ok(values);
                    }
                    if next == Token::Comma {
                        self.consume(Context::Values);
                        values.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    /// The one value after `=`, `==`, `!=`, `>` or `<`; nothing before a
    /// comma or the end is the empty value.
    fn exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::End | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(BTreeSet::from([literal]))
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

fn key_problem(key: &str) -> Result<(), String> {
    match crate::validation::label_key_problem(key) {
        Some(problem) => Err(format!("invalid label key {key:?}: {problem}")),
        None => Ok(()),
    }
}

/// The requirement, checked as the real server checks one: a valid key,
/// as many values as the operator takes, integers for `>` and `<`, and
/// valid label values.
fn new_requirement(
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
) -> Result<LabelRequirement, String> {
    key_problem(&key)?;
    let single = || values.iter().next().cloned().unwrap_or_default();
    let integer = || -> Result<i64, String> {
        if values.len() != 1 {
            return Err("for 'Gt', 'Lt' operators, exactly one value is required".into());
        }
        single()
            .parse()
            .map_err(|_| "for 'Gt', 'Lt' operators, the value must be an integer".to_owned())
    };
    let requirement = match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            return Err("for 'in', 'notin' operators, values set can't be empty".into());
        }
        Operator::Equals | Operator::NotEquals if values.len() != 1 => {
            return Err("exact-match compatibility requires one single value".into());
        }
        Operator::In => LabelRequirement::In(key.clone(), values.clone()),
        Operator::NotIn => LabelRequirement::NotIn(key.clone(), values.clone()),
        Operator::Equals => LabelRequirement::Equals(key.clone(), single()),
        Operator::NotEquals => LabelRequirement::NotEquals(key.clone(), single()),
        Operator::Exists => LabelRequirement::Exists(key.clone()),
        Operator::DoesNotExist => LabelRequirement::NotExists(key.clone()),
        Operator::GreaterThan => LabelRequirement::GreaterThan(key.clone(), integer()?),
        Operator::LessThan => LabelRequirement::LessThan(key.clone(), integer()?),
    };
    for value in &values {
        if let Some(problem) = crate::validation::label_value_problem(value) {
            return Err(format!(
                "invalid label value: {value:?}: at key: {key:?}: {problem}"
            ));
        }
    }
    Ok(requirement)
}

/// The requirements of a `labelSelector`, or the real server's words for
/// why it does not parse.
pub(crate) fn parse(selector: &str) -> Result<Vec<LabelRequirement>, String> {
    Parser::new(selector).parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_the_real_parser_says() {
        for (selector, message) in [
            ("a=b,", "found '', expected: identifier after ','"),
            (
                ",a=b",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            ("a=b=c", "found '=', expected: ',' or 'end of string'"),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "a=(b)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "app in web",
                "unable to parse requirement: found 'web' expected: '('",
            ),
            (
                "a >= 1",
                "unable to parse requirement: found '=', expected: identifier",
            ),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'",
            ),
            (
                "x>a",
                "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer",
            ),
        ] {
            assert_eq!(parse(selector), Err(message.to_owned()), "{selector:?}");
        }
    }

    #[test]
    fn what_parses() {
        let set = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        assert_eq!(
            parse(" a = b , !c, d notin (x,,y), e in (), f>3, in in (notin)").unwrap(),
            vec![
                LabelRequirement::Equals("a".into(), "b".into()),
                LabelRequirement::NotExists("c".into()),
                LabelRequirement::NotIn("d".into(), set(&["", "x", "y"])),
                LabelRequirement::In("e".into(), set(&[""])),
                LabelRequirement::GreaterThan("f".into(), 3),
                LabelRequirement::In("in".into(), set(&["notin"])),
            ]
        );
        assert_eq!(
            parse("a=").unwrap(),
            vec![LabelRequirement::Equals("a".into(), String::new())]
        );
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("   ").unwrap(), vec![]);
    }
}
