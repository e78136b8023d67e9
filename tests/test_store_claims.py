"""store.claims: the pieces of a build shared among processes, each computed by the one that claims it."""

from __future__ import annotations

import threading

from distil.store.claims import ShardClaims


def test_an_assisting_process_computes_only_the_pieces_nobody_holds_and_nobody_finished(tmp_path):
    out = tmp_path / "build"
    out.mkdir()
    (out / "b").write_text("done")  # finished earlier
    claims = ShardClaims(out)
    pieces = {"a": 0, "b": 1, "c": 2, "d": 3}
    with ShardClaims(out).take("a", wait=False) as held:  # another process's claim (its own open file)
        assert held
        assert list(claims.mine(pieces, assisting=True)) == [2, 3]


def test_the_builder_waits_for_a_held_piece_and_computes_it_when_its_holder_let_go_without_writing_it(tmp_path):
    """A holder that dies before writing its piece (here: a thread that lets go of its claim) leaves
    it to the builder's second pass, which waits for the claim, then computes the piece."""
    out = tmp_path / "build"
    out.mkdir()
    claimed, release = threading.Event(), threading.Event()

    def holder() -> None:
        with ShardClaims(out).take("a", wait=False):
            claimed.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    claimed.wait(5)
    order, seen = ShardClaims(out).mine({"a": "a", "b": "b"}), []
    seen.append(next(order))  # the first pass: b, the piece nobody holds
    (out / "b").write_text("done")
    release.set()  # the holder lets go without writing a
    seen.extend(order)  # the second pass waits for a's claim, then a is still missing
    thread.join()
    assert seen == ["b", "a"]
