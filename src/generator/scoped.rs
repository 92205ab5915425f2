//! Generators whose body borrows: lent to a closure, never leakable.

use std::io;

use super::{Generator, Yielder};

impl<T> Generator<'static, T> {
    /// Runs `f` with a generator whose `body` may borrow from the caller's
    /// stack, on a stack of the default size; the generator is dropped
    /// (its body unwound, if unfinished) before `scoped` returns.
    ///
    /// `f` gets the generator by `&mut` only, branded with a lifetime `'g`
    /// of its own: it can iterate it, but not keep, swap or leak it. That is
    /// what makes the borrows sound (see [`Generator`]).
    ///
    /// # Panics
    ///
    /// If no stack can be mapped (see
    /// [`scoped_with_stack_size`](Self::scoped_with_stack_size) for the
    /// error instead); and whatever `f` or the body panic with.
    ///
    /// Same fringe: do two trees hold the same leaves in the same order?
    ///
    /// ```
    /// use fibra::{Generator, Yielder};
    ///
    /// enum Tree {
    ///     Leaf(char),
    ///     Node(Box<Tree>, Box<Tree>),
    /// }
    /// fn walk(t: &Tree, y: &Yielder<char>) {
    ///     match t {
    ///         Tree::Leaf(c) => y.yield_(*c),
    ///         Tree::Node(l, r) => {
    ///             walk(l, y);
    ///             walk(r, y);
    ///         }
    ///     }
    /// }
    /// let node = |l, r| Tree::Node(Box::new(l), Box::new(r));
    /// let a = node(Tree::Leaf('a'), node(Tree::Leaf('b'), Tree::Leaf('c')));
    /// let b = node(node(Tree::Leaf('a'), Tree::Leaf('b')), Tree::Leaf('c'));
    /// let same = Generator::scoped(
    ///     |y| walk(&a, y),
    ///     |ga| Generator::scoped(|y| walk(&b, y), |gb| ga.eq(gb)),
    /// );
    /// assert!(same);
    /// ```
    pub fn scoped<F, R>(body: F, f: impl for<'g> FnOnce(&mut Generator<'g, T>) -> R) -> R
    where
        F: FnOnce(&Yielder<T>),
    {
        match Generator::scoped_with_stack_size(crate::stack::DEFAULT_STACK_SIZE, body, f) {
            Ok(r) => r,
            Err(e) => panic!("fibra::Generator::scoped: cannot create a stack: {e}"),
        }
    }

    /// Like [`scoped`](Self::scoped), on a stack of `stack_size` bytes
    /// (rounded up to pages).
    ///
    /// # Errors
    ///
    /// If the size is zero or too large, or the stack cannot be mapped; `f`
    /// is not called then.
    ///
    /// ```
    /// let words = ["a", "b"];
    /// let n = fibra::Generator::scoped_with_stack_size(
    ///     64 * 1024,
    ///     |y| words.iter().for_each(|w| y.yield_(*w)),
    ///     |g| g.count(),
    /// )
    /// .unwrap();
    /// assert_eq!(n, 2);
    /// ```
    pub fn scoped_with_stack_size<F, R>(
        stack_size: usize,
        body: F,
        f: impl for<'g> FnOnce(&mut Generator<'g, T>) -> R,
    ) -> io::Result<R>
    where
        F: FnOnce(&Yielder<T>),
    {
        // the generator is a local of this frame, dropped (its body
        // run to its end or unwound) before this returns or unwinds, while
        // the body's borrows are still live. `f` cannot take it away: it
        // only gets a `&mut Generator<'g, T>` for a `'g` it must accept
        // whatever it is, so it has no other generator of that exact type
        // (the lifetime is invariant; `new` makes only `'static` ones) to
        // swap in, and cannot return it.
        // SAFETY: as argued just above.
        let mut generator = unsafe { Generator::build(stack_size, body) }?;
        Ok(f(&mut generator))
    }
}
