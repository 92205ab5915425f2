//! The same-fringe problem, the classic case for coroutines: do two trees
//! of different shapes hold the same leaves in the same order? Each tree is
//! walked recursively by its own generator, and the walks advance in step,
//! so the comparison stops at the first difference without flattening
//! either tree.
//!
//! `cargo run --example same_fringe`

use fibra::{Generator, Yielder};

enum Tree {
    Leaf(char),
    Node(Box<Tree>, Box<Tree>),
}

/// Parses `((a b) (c d))`-style trees.
fn parse(src: &str) -> Tree {
    fn tree(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Tree {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        match chars.next() {
            Some('(') => {
                let left = tree(chars);
                let right = tree(chars);
                while chars.peek() == Some(&' ') {
                    chars.next();
                }
                assert_eq!(chars.next(), Some(')'), "unbalanced tree");
                Tree::Node(Box::new(left), Box::new(right))
            }
            Some(c) => Tree::Leaf(c),
            None => panic!("empty tree"),
        }
    }
    tree(&mut src.chars().peekable())
}

/// Yields the leaves of `tree` from the bottom of a recursion: what an
/// iterator can only do with an explicit stack.
fn walk(tree: &Tree, y: &Yielder<char>) {
    match tree {
        Tree::Leaf(c) => y.yield_(*c),
        Tree::Node(left, right) => {
            walk(left, y);
            walk(right, y);
        }
    }
}

/// Whether the fringes match, and how many leaves were compared.
///
/// The walks borrow the trees, so their generators are lent by
/// `Generator::scoped` (a generator that borrows must not be leakable).
fn same_fringe(a: &Tree, b: &Tree) -> (bool, usize) {
    Generator::scoped(
        |y| walk(a, y),
        |left| Generator::scoped(|y| walk(b, y), |right| compare(left, right)),
    )
}

/// Compares leaf by leaf; returning early (on a mismatch) lets `scoped`
/// drop the generators, which unwinds both walks.
fn compare(
    left: &mut impl Iterator<Item = char>,
    right: &mut impl Iterator<Item = char>,
) -> (bool, usize) {
    let mut compared = 0;
    loop {
        match (left.next(), right.next()) {
            (None, None) => return (true, compared),
            (l, r) if l == r => compared += 1,
            _ => return (false, compared + 1),
        }
    }
}

fn main() {
    let pairs = [
        ("((a b) (c d))", "(a (b (c d)))"),
        ("(((a b) c) d)", "(a (b (c d)))"),
        ("((a b) (c d))", "(a (x (c d)))"),
        ("(a (b c))", "((a b) (c d))"),
    ];
    for (a, b) in pairs {
        let (same, compared) = same_fringe(&parse(a), &parse(b));
        let verdict = if same { "same fringe" } else { "different" };
        println!("{a:<16} vs {b:<16}: {verdict} (after {compared} leaves)");
    }
}
