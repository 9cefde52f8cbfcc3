

class TestResumeBuffers:
    async def test_a_log_of_many_decode_chunks_resumes_whole(self, tmp_path: Path) -> None:
        """A log longer than the store's decode chunk (4 MiB) reads back event for event."""
        store = JsonlStore(tmp_path)
        backend = store.create(header("big"))
        events = [Event(seq=seq, time=seq, type="a/b", data=msgspec.Raw(b'{"t":"' + b"y" * 500 + b'"}'))
                  for seq in range(1, 12_001)]
        backend.append(events, expected_seq=0)
        backend.sync()
        backend.close()
        assert JsonlStore(tmp_path).path("big").stat().st_size > 2 * (4 << 20)
        _, read = JsonlStore(tmp_path).read("big")
        assert read == events
