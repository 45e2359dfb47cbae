use proptest::prelude::*;

use super::*;

fn tag(s: &str) -> Tag {
    s.parse().unwrap()
}

fn tags(list: &[&str]) -> Vec<Tag> {
    list.iter().map(|t| tag(t)).collect()
}

fn expr(text: &str) -> TagExpr {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn t(s: &str) -> Box<TagExpr> {
    Box::new(TagExpr::Tag(tag(s)))
}

#[test]
fn tag_expressions_parse_with_precedence() {
    use TagExpr::*;
    assert_eq!(
        expr("git and (github or gitlab) and not deprecated"),
        And(
            Box::new(And(t("git"), Box::new(Or(t("github"), t("gitlab"))))),
            Box::new(Not(t("deprecated")))
        )
    );
    assert_eq!(
        expr("a1 or b1 and c1"),
        Or(t("a1"), Box::new(And(t("b1"), t("c1"))))
    );
    assert_eq!(expr("not a1 and b1"), And(Box::new(Not(t("a1"))), t("b1")));
    assert_eq!(
        expr("a1 and b1 and c1"),
        And(Box::new(And(t("a1"), t("b1"))), t("c1"))
    );
    assert_eq!(
        expr("a1 or b1 or c1"),
        Or(Box::new(Or(t("a1"), t("b1"))), t("c1"))
    );
    assert_eq!(expr("  ((git))  "), *t("git"));
    assert_eq!(expr("not not git"), Not(Box::new(Not(t("git")))));
    assert_eq!(expr("(a1)and(b1)"), And(t("a1"), t("b1")));
    assert_eq!(
        expr("git\tand\nnot  gitlab"),
        And(t("git"), Box::new(Not(t("gitlab"))))
    );
}

#[test]
fn tag_expressions_match() {
    let e = expr("git and (github or gitlab) and not deprecated");
    assert!(e.matches(&tags(&["git", "github"])));
    assert!(e.matches(&tags(&["gitlab", "git", "other"])));
    assert!(!e.matches(&tags(&["git"])));
    assert!(!e.matches(&tags(&["git", "github", "deprecated"])));
    assert!(!e.matches(&[]));
    assert!(expr("not deprecated").matches(&[]));
    assert_eq!(
        e.tags().iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        ["git", "github", "gitlab", "deprecated"]
    );
}

#[test]
fn a_list_of_tags_means_any_of_them() {
    assert_eq!(TagExpr::any_of(Vec::new()), None);
    let e = TagExpr::any_of(tags(&["git", "github", "gitlab"])).unwrap();
    assert_eq!(e.to_string(), "git or github or gitlab");
    assert!(e.matches(&tags(&["gitlab"])));
    assert!(!e.matches(&tags(&["web"])));
    assert_eq!(TagExpr::any_of(tags(&["git"])), Some(*t("git")));
}

#[test]
fn tag_expressions_display_with_the_parentheses_they_need() {
    use TagExpr::*;
    let cases = [
        (
            And(t("a1"), Box::new(And(t("b1"), t("c1")))),
            "a1 and (b1 and c1)",
        ),
        (
            And(Box::new(Or(t("a1"), t("b1"))), t("c1")),
            "(a1 or b1) and c1",
        ),
        (
            Or(t("a1"), Box::new(And(t("b1"), t("c1")))),
            "a1 or b1 and c1",
        ),
        (Not(Box::new(Or(t("a1"), t("b1")))), "not (a1 or b1)"),
        (Not(Box::new(Not(t("a1")))), "not not a1"),
        (
            Or(t("a1"), Box::new(Or(t("b1"), t("c1")))),
            "a1 or (b1 or c1)",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
        assert_eq!(expr(text), e, "{text}");
    }
    assert_eq!(
        expr("git and (github or gitlab) and not deprecated").to_string(),
        "git and (github or gitlab) and not deprecated"
    );
}

/// (message part, column) of the error of `text`.
fn parse_error(text: &str) -> (String, usize) {
    let e = text.parse::<TagExpr>().expect_err(text);
    assert!(
        text.is_char_boundary(e.offset) && e.offset + e.len <= text.len(),
        "{e:?}"
    );
    (e.message, e.column)
}

#[test]
fn tag_expression_errors_say_where_and_what_was_expected() {
    let cases: &[(&str, &str, usize)] = &[
        ("", "the tag expression is empty: expected a tag", 1),
        ("   ", "the tag expression is empty", 4),
        (
            "git and",
            "expected a tag, `not` or `(` after `and`, found the end of the expression",
            8,
        ),
        (
            "git github",
            "expected `and`, `or` or the end, found `github`",
            5,
        ),
        (
            "(git or github",
            "expected `)` to close the `(` at character 1, found the end of the expression",
            15,
        ),
        ("git)", "unexpected `)`: no `(` is open", 4),
        ("()", "expected a tag, `not` or `(`, found `)`", 2),
        ("and git", "expected a tag, `not` or `(`, found `and`", 1),
        (
            "git or or gitlab",
            "expected a tag, `not` or `(`, found `or`",
            8,
        ),
        ("Git", "`Git` is not a tag: a tag must match", 1),
        (
            "git AND github",
            "found `AND` (operators are lowercase: `and`)",
            5,
        ),
        (
            "NOT git",
            "`NOT` (operators are lowercase: `not`) is not a tag",
            1,
        ),
        (
            "(git github)",
            "expected `and`, `or` or `)`, found `github`",
            6,
        ),
        (
            "git (github)",
            "expected `and`, `or` or the end, found `(`",
            5,
        ),
        ("git_hub", "`git_hub` is not a tag", 1),
        ("é and git_x", "`é` is not a tag", 1),
        ("git and é", "`é` is not a tag", 9),
        ("not", "after `not`, found the end of the expression", 4),
    ];
    for (text, message, column) in cases {
        let (found, at) = parse_error(text);
        assert!(found.contains(message), "{text:?}: {found}");
        assert_eq!(at, *column, "{text:?}: {found}");
    }
    let e = "git and".parse::<TagExpr>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected a tag, `not` or `(` after `and`, found the end of the expression (at character 8)"
    );
    assert_eq!((e.offset, e.len), (7, 0));
    let e = "git github".parse::<TagExpr>().unwrap_err();
    assert_eq!((e.offset, e.len), (4, 6));
}

#[test]
fn tag_expressions_have_limits() {
    let deep = format!("{}git{}", "(".repeat(40), ")".repeat(40));
    assert!(parse_error(&deep).0.contains("nested too deeply"));
    let nots = format!("{}git", "not ".repeat(40));
    assert!(parse_error(&nots).0.contains("nested too deeply"));
    let ok = format!("{}git{}", "(".repeat(32), ")".repeat(32));
    assert_eq!(expr(&ok), *t("git"));
    let long = vec!["git"; 300].join(" or ");
    assert!(parse_error(&long).0.contains("too long"));
    let fine = vec!["git"; 256].join(" and ");
    assert!(expr(&fine).matches(&tags(&["git"])));
    // Very long input is an error, never a stack overflow.
    let huge = "(".repeat(100_000);
    assert!(huge.parse::<TagExpr>().is_err());
}

fn tag_strategy() -> impl Strategy<Value = Tag> {
    "[a-z0-9][a-z0-9-]{0,6}[a-z0-9]"
        .prop_filter("keywords are not tags in expressions", |s| {
            !matches!(s.as_str(), "and" | "or" | "not")
        })
        .prop_map(|s| tag(&s))
}

fn expr_strategy() -> impl Strategy<Value = TagExpr> {
    tag_strategy()
        .prop_map(TagExpr::Tag)
        .prop_recursive(6, 48, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| TagExpr::Not(Box::new(e))),
                (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| TagExpr::And(Box::new(a), Box::new(b))),
                (inner.clone(), inner).prop_map(|(a, b)| TagExpr::Or(Box::new(a), Box::new(b))),
            ]
        })
}

/// Text that looks like an expression.
fn exprish() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r"(and|or|not|AND|git|gitlab|[ ()]|[a-zA-Z_é-]){0,40}").unwrap()
}

fn check_parse(text: &str) {
    match text.parse::<TagExpr>() {
        Ok(e) => {
            let shown = e.to_string();
            assert_eq!(
                shown.parse::<TagExpr>().as_ref(),
                Ok(&e),
                "{text:?} -> {shown:?}"
            );
        }
        Err(e) => {
            assert!(text.is_char_boundary(e.offset), "{e:?}");
            assert!(e.offset + e.len <= text.len(), "{e:?}");
            assert!(e.column >= 1, "{e:?}");
            assert_eq!(e.column, text[..e.offset].chars().count() + 1);
        }
    }
}

proptest! {
    #[test]
    fn tag_expression_parsing_never_panics(text in any::<String>()) {
        check_parse(&text);
    }

    #[test]
    fn expression_like_text_never_panics(text in exprish()) {
        check_parse(&text);
    }

    #[test]
    fn display_parses_back(e in expr_strategy()) {
        let shown = e.to_string();
        prop_assert_eq!(shown.parse::<TagExpr>(), Ok(e));
    }

    #[test]
    fn a_list_matches_when_any_tag_does(
        list in proptest::collection::vec(tag_strategy(), 1..5),
        have in proptest::collection::vec(tag_strategy(), 0..5),
    ) {
        let e = TagExpr::any_of(list.clone()).unwrap();
        prop_assert_eq!(e.matches(&have), list.iter().any(|t| have.contains(t)));
        prop_assert_eq!(e.to_string().parse::<TagExpr>(), Ok(e));
    }
}
