from mcpclient.hub import Status


async def test_quick(hub, toolbox_config):
    await hub.start([toolbox_config("tb")])
    names = [t.prefixed_name for t in hub.tools()]
    assert "tb_echo" in names and "tb_delete_everything" not in names
    r = await hub.call_tool("tb_echo", {"text": "hi"})
    assert r.output == "hi" and not r.is_error
    r = await hub.call_tool("tb_crash", {})
    assert r.is_error and "unreachable" in r.output, r.output
    assert hub.snapshots()[0].status is Status.UNAVAILABLE
