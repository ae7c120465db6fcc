//! Malformed inputs give spanned diagnostics, never a panic or a stack overflow.

use tlc_ir::{parse, Diagnostic};

fn errors(src: &str) -> Vec<Diagnostic> {
    match parse(src) {
        Ok(f) => panic!("expected an error for:\n{src}\ngot {f:?}"),
        Err(e) => {
            assert!(!e.is_empty(), "errors without a diagnostic");
            e
        }
    }
}

/// The first error's message and the source text it points at.
fn first(src: &str) -> (String, String) {
    let e = errors(src);
    let d = &e[0];
    let text = src.get(d.span.start..d.span.end).unwrap_or("<bad span>");
    (d.message.clone(), text.to_string())
}

fn has(src: &str, needle: &str) -> Diagnostic {
    let e = errors(src);
    match e.iter().find(|d| d.message.contains(needle)) {
        Some(d) => d.clone(),
        None => panic!("no error containing {needle:?}: {e:?}"),
    }
}

const HEAD: &str = "@T.prim_func\ndef f(A: T.Tensor((128, 64), \"float16\"), C: T.Tensor((128, 128), \"float32\")):\n    with T.Kernel(4, threads=128) as bx:\n";

fn kernel(body: &str) -> String {
    let mut s = HEAD.to_string();
    for line in body.lines() {
        s.push_str("        ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

#[test]
fn empty_file() {
    let e = errors("");
    assert_eq!(e[0].message, "expected `@T.prim_func`");
    assert_eq!((e[0].span.start, e[0].span.end), (0, 0));
    let src = "# just a comment\n\n";
    let e = errors(src);
    assert_eq!(e[0].message, "expected `@T.prim_func`");
    assert_eq!(e[0].span.start, src.len());
}

#[test]
fn tab_indentation() {
    let src = "@T.prim_func\ndef f():\n\twith T.Kernel(1) as bx:\n\t\tpass\n";
    let e = errors(src);
    assert_eq!(e[0].message, "tab character in indentation");
    assert_eq!(e[0].span.start, src.find('\t').unwrap());
}

#[test]
fn bad_dedent() {
    let src = "@T.prim_func\ndef f():\n    with T.Kernel(1) as bx:\n        pass\n      pass\n";
    let (msg, _) = first(src);
    assert_eq!(msg, "unindent does not match any outer indentation level");
    let e = errors(src);
    assert_eq!(e[0].span.start, src.rfind("\n      pass").unwrap() + 1);
}

#[test]
fn huge_integer() {
    let src = kernel("x = 123456789012345678901234567890");
    assert_eq!(
        first(&src),
        (
            "integer literal too large".to_string(),
            "123456789012345678901234567890".to_string()
        )
    );
    // 2^63 fits only when negated.
    assert_eq!(
        first(&kernel("x = 9223372036854775808")),
        (
            "integer literal too large".to_string(),
            "9223372036854775808".to_string()
        )
    );
}

#[test]
fn deeply_nested_parentheses() {
    let src = kernel(&format!(
        "x = {}1{}",
        "(".repeat(20_000),
        ")".repeat(20_000)
    ));
    let (msg, text) = first(&src);
    assert_eq!((msg.as_str(), text.as_str()), ("nesting too deep", "("));
    // Deep but allowed bracket nesting still hits the expression depth limit cleanly.
    let src = kernel(&format!("x = {}1{}", "[".repeat(250), "]".repeat(250)));
    assert_eq!(first(&src).0, "expression nested too deeply");
}

#[test]
fn long_flat_chains() {
    let terms = vec!["a"; 100_000].join("+");
    let (msg, _) = first(&kernel(&format!("x = {terms}")));
    assert_eq!(msg, "expression nested too deeply");
    let (msg, _) = first(&kernel(&format!("x = {}a", "- ".repeat(100_000))));
    assert_eq!(msg, "expression nested too deeply");
    let (msg, _) = first(&kernel(&format!("x = {}a", "not ".repeat(100_000))));
    assert_eq!(msg, "expression nested too deeply");
    // A chain below the limit is fine.
    assert!(parse(&kernel(&format!("x = {}", vec!["a"; 150].join("+")))).is_ok());
}

#[test]
fn deep_statement_nesting() {
    // Deep indentation is bounded...
    let mut src = String::from("@T.prim_func\ndef f():\n");
    for depth in 1..150 {
        src.push_str(&" ".repeat(depth * 2));
        src.push_str("if a:\n");
    }
    src.push_str(&" ".repeat(300));
    src.push_str("pass\n");
    assert_eq!(first(&src).0, "nesting too deep");
    // The deepest allowed nesting (99 indentation levels) with the deepest allowed
    // expression (depth 200) inside lowers fine on a test thread's 2 MiB stack.
    let mut src = String::from("@T.prim_func\ndef f():\n    with T.Kernel(1) as bx:\n");
    for depth in 2..99 {
        src.push_str(&" ".repeat(depth * 4));
        src.push_str(&format!("for i{depth} in T.serial(2):\n"));
    }
    let leaf = format!("{}x = {}\n", " ".repeat(99 * 4), vec!["a"; 200].join(" + "));
    assert!(parse(&format!("{src}{leaf}")).is_ok());
    let leaf = format!("{}x = {}\n", " ".repeat(99 * 4), vec!["a"; 201].join(" + "));
    assert_eq!(
        first(&format!("{src}{leaf}")).0,
        "expression nested too deeply"
    );
    // ...and so are long elif chains and wide T.Parallel nests.
    let mut src = kernel("if a == 0:\n    pass");
    for i in 1..5000 {
        src.push_str(&format!("        elif a == {i}:\n            pass\n"));
    }
    assert_eq!(first(&src).0, "statements nested too deeply");
    let vars: Vec<String> = (0..300).map(|i| format!("i{i}")).collect();
    let extents = vec!["2"; 300].join(", ");
    let src = kernel(&format!(
        "for {} in T.Parallel({extents}):\n    pass",
        vars.join(", ")
    ));
    assert_eq!(first(&src).0, "statements nested too deeply");
}

#[test]
fn binary_garbage() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..200 {
        let len = (state % 400) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse(&text) {
            for d in &e {
                assert!(
                    d.span.start <= d.span.end && d.span.end <= text.len(),
                    "{d}"
                );
            }
        }
    }
    let text = String::from_utf8_lossy(b"\x00\xff\xfe@T.prim_func\x01");
    let (msg, _) = first(&text);
    assert!(msg.starts_with("unexpected character"), "{msg}");
}

#[test]
fn unknown_constructs() {
    let d = has(
        &kernel("T.coppy(A, C)"),
        "unknown TileLang construct `T.coppy`",
    );
    assert_eq!(d.notes[0].message, "did you mean `T.copy`?");
    let d = has(
        &kernel("for k in T.Pipelind(4, num_stages=2):\n    pass"),
        "unknown TileLang construct `T.Pipelind`",
    );
    assert_eq!(d.notes[0].message, "did you mean `T.Pipelined`?");
    let d = has(
        &kernel("x = T.frobnicate(1)"),
        "unknown TileLang construct `T.frobnicate`",
    );
    assert!(d.notes.is_empty());
    let src = kernel("S = T.alloc_shard((4, 4), \"float16\")");
    let d = has(&src, "unknown TileLang construct `T.alloc_shard`");
    assert_eq!(d.notes[0].message, "did you mean `T.alloc_shared`?");
    assert_eq!(&src[d.span.start..d.span.end], "T.alloc_shard");
}

#[test]
fn parse_error_messages() {
    let src = "@T.prim_func\ndef f()\n    pass\n";
    let (msg, _) = first(src);
    assert_eq!(msg, "expected `:` or `->`, found newline");
    let (msg, text) = first(&kernel("x = (1 + 2"));
    assert_eq!((msg.as_str(), text.as_str()), ("`(` was never closed", "("));
    let (msg, text) = first(&kernel("x = 1 +"));
    assert_eq!((msg.as_str(), text.as_str()), ("unexpected newline", "\n"));
    let (msg, text) = first(&kernel("x = (1 + 2]"));
    assert_eq!(
        (msg.as_str(), text.as_str()),
        ("expected `)` or `,`, found `]`", "]")
    );
    // At end of file, the error points at the end.
    let src = "@T.prim_func\ndef f():\n";
    let e = errors(src);
    assert_eq!((e[0].span.start, e[0].span.end), (src.len(), src.len()));
    assert_eq!(
        e[0].message,
        "expected an indented block, found end of file"
    );
    let (msg, _) = first("@T.prim_func\ndef f(");
    assert_eq!(msg, "`(` was never closed");
    let (msg, text) = first(&kernel("x = a < b < c"));
    assert_eq!(msg, "comparison operators cannot be chained");
    assert_eq!(text, "a < b < c");
    let (msg, text) = first(&kernel("x = lambda: 1"));
    assert_eq!(
        (msg.as_str(), text.as_str()),
        ("expected an identifier, found `:`", ":")
    );
    let (msg, text) = first(&kernel("x = lambda a, b: a + b"));
    assert!(
        msg.contains("`lambda` is only allowed as the combiner of `T.comm_reducer`"),
        "{msg}"
    );
    assert_eq!(text, "lambda a, b: a + b");
}

#[test]
fn argument_errors() {
    has(
        &kernel("T.copy(A)"),
        "`T.copy` is missing its argument `dst`",
    );
    has(
        &kernel("T.copy(A, C, 1)"),
        "`T.copy` takes at most 2 positional arguments",
    );
    let d = has(
        &kernel("T.copy(A, C, srcc=1)"),
        "unknown keyword argument `srcc`",
    );
    assert_eq!(d.notes[0].message, "did you mean `src`?");
    let d = has(
        &kernel("T.gemm(A, A, C, transpose_a=True)"),
        "unknown keyword argument `transpose_a`",
    );
    assert_eq!(d.notes[0].message, "did you mean `transpose_A`?");
    has(
        &kernel("for k in T.Pipelined(4, num_stages=bx):\n    pass"),
        "`num_stages` must be a constant integer",
    );
    has(
        "@T.prim_func\ndef f():\n    with T.Kernel(1, threads=bx) as bx:\n        pass\n",
        "the thread count must be a constant integer",
    );
    has(
        &kernel("T.gemm(A, A, C, policy=T.GemmWarpPolicy.Diagonal)"),
        "unknown warp policy",
    );
    has(
        &kernel("T.gemm(A, A, C, False, False, 128, 128, 64, 7, False)"),
        "unknown warp policy 7",
    );
    has(
        &kernel("for i in range(0, 8, 2):\n    pass"),
        "a loop step is not supported",
    );
    has(
        &kernel("for i, j in T.serial(4):\n    pass"),
        "only `T.Parallel` loops",
    );
    has(
        &kernel("for i, j in T.Parallel(4):\n    pass"),
        "`T.Parallel` has 1 extent but the loop has 2 variables",
    );
    has(
        "@T.prim_func\ndef f():\n    with T.Kernel(1, 2) as bx:\n        pass\n",
        "2 grid extents but 1 block variable",
    );
    has(
        &kernel("T.use_swizzle(10, order=\"diagonal\")"),
        "unknown rasterization order",
    );
    has(
        &kernel("T.min_blocks_per_sm(2)\nT.min_blocks_per_sm(3)"),
        "a kernel gives `T.min_blocks_per_sm` once",
    );
    has(
        &kernel("x = T.cast(A[0, 0], \"float17\")"),
        "unknown dtype `float17`",
    );
}

#[test]
fn several_errors_are_collected() {
    let e = errors(&kernel("T.coppy(A, C)\nT.fil(C, 0)"));
    assert_eq!(e.len(), 2, "{e:?}");
}

#[test]
fn region_errors() {
    has(
        &kernel("T.copy(A[0, 0], C[0, 0])"),
        "both operands of `T.copy` are single elements",
    );
    has(&kernel("T.copy(X, C)"), "unknown buffer `X`");
    has(
        &kernel("T.copy(A[0:4:2, 0:4], C[0:4, 0:4])"),
        "a slice step is not supported",
    );
    // A 3-D operand whose leading extent is not 1 cannot give a 2-D corner its extents.
    let src = "@T.prim_func\ndef f(A: T.Tensor((2, 4, 8), \"float16\"), C: T.Tensor((4, 8), \"float16\")):\n    with T.Kernel(1) as bx:\n        T.copy(A, C[0, 0])\n";
    has(src, "leading extents are not 1");
    has(&kernel("A[0:2, 0] = 1"), "slices are not allowed here");
}

#[test]
fn tvmscript_errors() {
    // A partial flat range is not a region.
    has(
        &kernel("T.fill(T.tvm_access_ptr(T.type_annotation(\"float32\"), C.data, 0, 64, 2), 0)"),
        "`T.tvm_access_ptr` over part of a buffer is not supported",
    );
    // Non-contiguous strides.
    has(
        "@T.prim_func\ndef f(A_handle: T.handle):\n    A = T.match_buffer(A_handle, (4, 8), \"float16\", strides=(16, 1))\n    with T.Kernel(1) as bx:\n        pass\n",
        "only contiguous row-major buffers are supported",
    );
    has(
        "@T.prim_func\ndef f(A_handle: T.handle):\n    with T.Kernel(1) as bx:\n        pass\n",
        "handle `A_handle` has no `T.match_buffer`",
    );
    // Gemm sizes must agree with the operands.
    let src = kernel("T.gemm(A, A, C, False, True, 128, 128, 32, 0, False, 0, 0)");
    let d = has(
        &src,
        "`T.gemm` size K disagrees with operand A, whose extent is 64",
    );
    assert_eq!(&src[d.span.start..d.span.end], "32");
    // Per-thread code next to tile-level code becomes thread regions (docs/ir.md, "Thread
    // regions"); where it cannot (inside `T.Parallel`, on a fragment), one error at the use,
    // saying what to write instead.
    let src = "@T.prim_func\ndef f(A: T.Buffer((64,), \"float32\")):\n    bx = T.launch_thread(\"blockIdx.x\", 1)\n    tx = T.launch_thread(\"threadIdx.x\", 64)\n    with T.block(\"tilelang_root\"):\n        S = T.alloc_buffer((64,), scope=\"shared.dyn\")\n        T.fill(T.region(S[0], 2, 64), 0)\n        for i in T.Parallel(64):\n            A[i] = S[i] + T.Cast(\"float32\", tx)\n";
    let e = errors(src);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        e[0].message,
        "per-thread code (it names `tx`) inside a `T.Parallel` loop"
    );
    assert_eq!(&src[e[0].span.start..e[0].span.end], "tx");
    assert!(e[0]
        .notes
        .iter()
        .any(|n| n.message.contains("index its body with its loop variables")));
    let src = kernel(
        "L = T.alloc_fragment((4,), \"float32\")\ntx = T.get_thread_binding()\nT.clear(L)\nL[tx] = 1.0",
    );
    let d = has(&src, "fragment `L` in per-thread code (it names `tx`)");
    assert!(d
        .notes
        .iter()
        .any(|n| n.message.contains("`T.alloc_local` buffer")));
    let src = kernel(
        "tx = T.get_thread_binding()\nfor k in T.serial(tx):\n    for i in T.Parallel(4):\n        C[i, 0] = 0.0",
    );
    has(
        &src,
        "`tx` differs between threads, in a loop whose body holds tile ops",
    );
    let (msg, text) = first(&kernel("tx = T.get_thread_binding(3)"));
    assert_eq!(msg, "the thread dimension is 0, 1 or 2 (x, y, z), found 3");
    assert_eq!(text, "3");
    let (msg, _) = first("@T.prim_func\ndef f():\n    tx = T.get_thread_binding()\n");
    assert_eq!(msg, "`T.get_thread_binding` outside a kernel");
    // A 0.1.15 kernel must give its thread count.
    has(
        "@T.prim_func\ndef f():\n    for bx in T.thread_binding(4, thread=\"blockIdx.x\"):\n        with T.sblock(\"root\"):\n            pass\n",
        "never says how many threads",
    );
    has(
        &kernel("T.attr(None, \"pragma_unroll\", 1)"),
        "unsupported attribute",
    );
    has(
        &kernel("for k in T.serial(4, annotations={\"num_stagez\": 2}):\n    pass"),
        "unsupported loop annotation",
    );
}

#[test]
fn structure_errors() {
    has(
        "def f():\n    pass\n",
        "expected `@T.prim_func` before the kernel's `def`",
    );
    has(
        "@T.prim_func\ndef f():\n    pass\n@T.prim_func\ndef g():\n    pass\n",
        "exactly one `@T.prim_func`",
    );
    has(
        "x = 1\n@T.prim_func\ndef f():\n    pass\n",
        "unexpected statement at module level",
    );
    has(
        "@T.prim_func\ndef f(x: T.float32):\n    pass\n",
        "a scalar parameter is int32 or int64, not float32",
    );
    has(
        "@T.prim_func\ndef f():\n    S = T.alloc_shared((4,), \"float16\")\n",
        "only allowed inside `T.Kernel`",
    );
    // `M = T.dynamic("m")` names the dim `m` (docs/ir.md): only `M` is in scope, the
    // name must be an identifier, and it may not be another dim's or a buffer's.
    // A triple-quoted string left open: located where its text starts.
    let open_doc = "@T.prim_func\ndef f():\n    \"\"\"never closed\n    pass\n";
    let d = has(open_doc, "unterminated string literal");
    assert_eq!(d.span.start, open_doc.find("\"never").unwrap_or(0));
    let alias = "M = T.dynamic(\"m\")\n@T.prim_func\ndef f(A: T.Tensor((M,), \"float32\")):\n    with T.Kernel(1, threads=32) as bx:\n        A[0] = m\n";
    let d = has(
        alias,
        "`m` is not defined here: the symbolic dimension named \"m\" is `M`",
    );
    assert_eq!(alias.get(d.span.start..d.span.end), Some("m"));
    has(
        "M = T.symbolic(\"m n\")\n@T.prim_func\ndef f():\n    pass\n",
        "\"m n\", is not an identifier",
    );
    has(
        "M = T.dynamic(\"N\")\nN = T.dynamic(\"N\")\n@T.prim_func\ndef f(A: T.Tensor((M, N), \"float32\")):\n    pass\n",
        "the symbolic dimension `N` is declared twice",
    );
    has(
        "M = T.dynamic(\"A\")\n@T.prim_func\ndef f(A: T.Tensor((M,), \"float32\")):\n    pass\n",
        "is named \"A\", which is also the name of a buffer",
    );
    let src = "M = T.symbolic(\"M\", \"float32\")\n@T.prim_func\ndef f():\n    pass\n";
    let d = has(src, "symbolic dimensions are int32 or int64");
    assert_eq!(src.get(d.span.start..d.span.end), Some("\"float32\""));
}

/// Malformed intrinsics and layouts: located errors, never a panic.
#[test]
fn intrinsic_errors() {
    let thread = |body: &str| {
        kernel(&format!(
            "S = T.alloc_shared((64, 64), \"float16\")\nF = T.alloc_local((8,), \"float16\")\nfor tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n    {body}"
        ))
    };
    let at = |body: &str, needle: &str, text: &str| {
        let src = thread(body);
        let d = has(&src, needle);
        assert_eq!(src.get(d.span.start..d.span.end), Some(text), "{d:?}");
        d
    };
    at(
        "T.cp_async(S[tx, 0], A[tx, 0])",
        "`T.cp_async` is missing its argument `bytes`",
        "T.cp_async(S[tx, 0], A[tx, 0])",
    );
    at(
        "T.cp_async(S[tx, 0], A[tx, 0], tx)",
        "the byte count of `T.cp_async` must be a constant integer",
        "tx",
    );
    let d = at(
        "T.cp_async(S, A[tx, 0], 16)",
        "an operand of `T.cp_async` is an element reference `buf[i, j]`",
        "S",
    );
    assert_eq!(
        d.notes[0].message,
        "write `S[0]` (one index per dimension) for its start"
    );
    at(
        "T.cp_async(S[tx, 0:8], A[tx, 0], 16)",
        "an operand of `T.cp_async` names one element; slices are not allowed",
        "0:8",
    );
    at(
        "T.cp_async(S[tx, 0] + 1, A[tx, 0], 16)",
        "an operand of `T.cp_async` is an element reference",
        "S[tx, 0] + 1",
    );
    at(
        "T.cp_async(T.foo[0], A[tx, 0], 16)",
        "expected a buffer name",
        "T.foo",
    );
    at(
        "T.cp_async(S[tx, 0], A[tx, 0], 16, tx < 4, 1)",
        "`T.cp_async` takes at most 4 positional arguments",
        "1",
    );
    at(
        "T.cp_async_commit(0)",
        "`T.cp_async_commit` takes at most 0 positional arguments",
        "0",
    );
    at(
        "T.cp_async_wait()",
        "`T.cp_async_wait` is missing its argument `n`",
        "T.cp_async_wait()",
    );
    at(
        "T.cp_async_wait(tx)",
        "the group count of `T.cp_async_wait` must be a constant integer",
        "tx",
    );
    at(
        "T.ldmatrix(F[0], S[tx, 0], num=4, trans=tx)",
        "the transpose flag of `T.ldmatrix` must be `True` or `False`",
        "tx",
    );
    at(
        "T.ldmatrix(F[0], S[tx, 0], num=n, trans=False)",
        "the matrix count of `T.ldmatrix` must be a constant integer",
        "n",
    );
    let d = at(
        "T.ldmatrix(F[0], S[tx, 0], nums=4)",
        "unknown keyword argument `nums` for `T.ldmatrix`",
        "nums",
    );
    assert_eq!(d.notes[0].message, "did you mean `num`?");
    at(
        "T.mma_sync(F[0], F[0])",
        "`T.mma_sync` is missing its argument `b`",
        "T.mma_sync(F[0], F[0])",
    );
    at(
        "x = T.mma_sync(F[0], F[0], F[4])",
        "`T.mma_sync` is not a scalar expression",
        "T.mma_sync(F[0], F[0], F[4])",
    );
    let d = at(
        "T.ldmatrx(F[0], S[tx, 0])",
        "unknown TileLang construct `T.ldmatrx`",
        "T.ldmatrx",
    );
    assert_eq!(d.notes[0].message, "did you mean `T.ldmatrix`?");
    let d = at(
        "T.cp_asyncc(F[0], S[tx, 0], 16)",
        "unknown TileLang construct",
        "T.cp_asyncc",
    );
    assert_eq!(d.notes[0].message, "did you mean `T.cp_async`?");
}

#[test]
fn layout_errors() {
    let ann = |layout: &str| {
        kernel(&format!(
            "S = T.alloc_shared((64, 64), \"float16\")\nT.annotate_layout({{S: {layout}}})"
        ))
    };
    let at = |layout: &str, needle: &str, text: &str| {
        let src = ann(layout);
        let d = has(&src, needle);
        assert_eq!(src.get(d.span.start..d.span.end), Some(text), "{d:?}");
        d
    };
    let d = at(
        "T.make_tiled_layout(S)",
        "unsupported layout",
        "T.make_tiled_layout(S)",
    );
    assert!(
        d.notes[0]
            .message
            .contains("T.make_padded_layout(S, pad=P)"),
        "{d:?}"
    );
    at("42", "unsupported layout", "42");
    at(
        "T.make_swizzled_layout(S, bytes=b)",
        "the swizzle width `bytes` must be a constant integer",
        "b",
    );
    at(
        "T.make_swizzled_layout(S, byts=64)",
        "unknown keyword argument `byts` for `T.make_swizzled_layout`",
        "byts",
    );
    at(
        "T.make_padded_layout(S)",
        "`T.make_padded_layout` is missing its argument `pad`",
        "T.make_padded_layout(S)",
    );
    at(
        "T.make_padded_layout(A, pad=8)",
        "the layout of `S` must be made from `S` itself",
        "A",
    );
    at(
        "T.mma_accumulator_layout(S, warps_m=2)",
        "`T.mma_accumulator_layout` is missing its argument `warps_n`",
        "T.mma_accumulator_layout(S, warps_m=2)",
    );
    at(
        "T.mma_accumulator_layout(S, warps_m=2, warps_n=1.5)",
        "`warps_n` must be a constant integer",
        "1.5",
    );
}

#[test]
fn thread_binding_statement_errors() {
    let head = "@T.prim_func\ndef f(A: T.Tensor((4, 32), \"float32\")):\n    with T.Kernel(1, threads=(32, 4)) as bx:\n";
    let src = format!("{head}        tx = T.thread_binding(0, 16, thread=\"threadIdx.x\")\n        A[0, tx] = 1.0\n");
    let (msg, at) = first(&src);
    assert_eq!(
        msg,
        "`tx` binds 16 threads, but the block has 32 along threadIdx.x"
    );
    assert_eq!(at, "T.thread_binding(0, 16, thread=\"threadIdx.x\")");
    let src = format!("{head}        tx = T.thread_binding(1, 32, thread=\"threadIdx.x\")\n        A[0, tx] = 1.0\n");
    assert_eq!(
        first(&src),
        (
            "a thread binding starts at 0, found 1".to_string(),
            "1".to_string()
        )
    );
    let src = format!("{head}        tx = T.thread_binding(0, 1, thread=\"blockIdx.x\")\n        A[0, tx] = 1.0\n");
    let (msg, at) = first(&src);
    assert!(msg.contains("binds a thread index"), "{msg}");
    assert_eq!(at, "\"blockIdx.x\"");
    let src = format!("{head}        tx = T.thread_binding(0, 32)\n        A[0, tx] = 1.0\n");
    assert!(first(&src).0.contains("needs `thread="));
}
