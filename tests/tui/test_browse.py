"""Browse against a real daemon: the tree, the detail pane and every memory edit."""

from __future__ import annotations

from textual.widgets import Input, TextArea

from zcor_tui.screens.browse import BrowseScreen
from zcor_tui.screens.dialogs import ConfirmDialog, NodeForm, NodePicker
from zcor_tui.widgets.memory_tree import LEVELS_ABOVE, MemoryTree, Slot
from zcord.service import Service

from .conftest import press, screen_text, settle, text_of, until


def labels(tree_node) -> list[str]:
    return [str(c.label) for c in tree_node.children]


async def test_browse_and_expand(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        roots = labels(tree.root)
        assert [r.split()[0] for r in roots] == ["家人", "工作", "爱好"]
        assert not tree.root.children[0].is_expanded and len(tree.root.children[0].children) == 0  # lazy

        await pilot.press("enter")  # expand 家人
        await settle(pilot)
        family = tree.root.children[0]
        assert family.is_expanded
        assert labels(family) == ["★ 妈妈 m2 (1)", "爸爸 m3"]

        await pilot.press("down")  # 妈妈
        await settle(pilot)
        detail = text_of(app.screen.query_one("#detail").content)
        for expected in ("m2", "★ important", "家人 › 妈妈", "妈妈 · 老师", "小学老师，喜欢养花",
                         "我妈是小学老师，平时最爱养花。", "2026-01-01 09:01:00 +08:00", "Children 1: m4 妈妈的生日"):
            assert expected in detail, expected

        # a superseded memory is marked in the tree in words, not only dimmed, and says by which
        # memory in the detail
        await pilot.press("down", "down", "enter")  # 工作
        await settle(pilot)
        work = tree.root.children[1]
        old = work.children[0]
        assert old.data.item.superseded and str(old.label) == "⊘ 旧的项目安排 m6 superseded"
        assert "dim" in str(old.label.spans[1].style)
        assert "⊘" not in str(work.children[1].label)
        tree.move_cursor(old)
        await settle(pilot)
        detail = text_of(app.screen.query_one("#detail").content)
        assert f"superseded by {ids['deadline']}" in detail and "上线时间改了" in detail

        # linked relationships show on the person's memory
        app.show_node(ids["colleague"])
        await settle(pilot)
        assert tree.cursor_item.id == ids["colleague"]
        assert "qq:10001 小王" in text_of(app.screen.query_one("#detail").content)


async def test_create_and_edit_then_see_the_diff_in_history(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["dad"])
        await settle(pilot)
        await pilot.press("n")  # new child of 爸爸
        await settle(pilot)
        form = app.screen
        assert isinstance(form, NodeForm)
        form.query_one("#title", Input).value = "爸爸的爱好"
        form.query_one("#content", TextArea).text = "爸爸周末喜欢钓鱼。"
        form.query_one("#keywords", Input).value = "钓鱼, 周末"
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, BrowseScreen)
        tree = app.screen.query_one(MemoryTree)
        new = tree.cursor_item
        assert new.title == "爸爸的爱好" and tree.nodes_by_id[new.id].parent.data.item.id == ids["dad"]
        assert "Created" in app.noted()

        await press(pilot, "e")
        form = app.screen
        assert isinstance(form, NodeForm) and form.query_one("#title", Input).value == "爸爸的爱好"
        form.query_one("#content", TextArea).text = "爸爸周末喜欢去河边钓鱼。"
        await press(pilot, "ctrl+s")
        assert "河边" in text_of(app.screen.query_one("#detail").content)

        await pilot.press("3")  # History
        await settle(pilot)
        record = text_of(app.screen.query_one("#record").content)
        assert "zcor_memory_write" in record and f"node.update · {new.id}" in record
        assert "- 爸爸周末喜欢钓鱼。" in record and "+ 爸爸周末喜欢去河边钓鱼。" in record
        await pilot.press("escape", "v")  # leave the keyword field (focused on entry), then side by side
        record = text_of(app.screen.query_one("#record").content)
        assert "before" in record and "after" in record and "河边" in record


async def test_a_refused_edit_keeps_the_form_open_with_the_reason(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "N")
        form = app.screen
        form.query_one("#title", Input).value = "x" * 201
        await press(pilot, "ctrl+s")
        assert app.screen is form
        assert "“Title”" in text_of(form.query_one("#dialog-error").content)  # as the form labels it
        # Esc on a filled form asks first; n keeps what was typed, y discards it
        await press(pilot, "escape")
        assert isinstance(app.screen, ConfirmDialog) and "discard" in app.screen.question
        await press(pilot, "n")
        assert app.screen is form and form.query_one("#title", Input).value == "x" * 201
        await press(pilot, "escape", "y")
        assert isinstance(app.screen, BrowseScreen)
        # an untouched form closes at once; a number key does not switch screens under it
        await press(pilot, "N")
        assert isinstance(app.screen, NodeForm)
        app.screen.query_one("#save").focus()
        await press(pilot, "3")
        assert isinstance(app.screen, NodeForm) and app.current_mode == "browse"
        await press(pilot, "escape")
        assert isinstance(app.screen, BrowseScreen)


async def test_delete_says_first_that_the_memory_has_children(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        assert tree.cursor_item.id == ids["family"]
        await press(pilot, "d")
        assert isinstance(app.screen, BrowseScreen)  # no question that can only end in a refusal
        warning = app.noted("warning")
        assert "has 2 children" in warning and ids["mom"] in warning and ids["dad"] in warning
        assert "Move (m) or delete them first" in warning
        with d.client("operator") as op:
            assert op.call_tool("zcor_memory_read", {"id": ids["family"]})["childCount"] == 2
        # a leaf goes, and the detail pane moves to a neighbour (here its parent), not to an error
        app.show_node(ids["birthday"])
        await settle(pilot)
        await press(pilot, "d")
        assert isinstance(app.screen, ConfirmDialog)
        await press(pilot, "y")
        assert f"Deleted {ids['birthday']}" in app.noted()
        await until(pilot, lambda: ids["birthday"] not in tree.nodes_by_id, what="the deleted line to go")
        await settle(pilot)
        detail = text_of(app.screen.query_one("#detail").content)
        assert tree.cursor_item.id == ids["mom"] and detail.startswith(ids["mom"]) and "No memory" not in detail
        # between siblings it is the next one
        app.show_node(ids["old_plan"])
        await settle(pilot)
        await press(pilot, "d", "y")
        await until(pilot, lambda: ids["old_plan"] not in tree.nodes_by_id, what="the deleted line to go")
        await settle(pilot)
        assert tree.cursor_item.id == ids["deadline"]
        assert text_of(app.screen.query_one("#detail").content).startswith(ids["deadline"])


async def test_an_empty_memory_says_how_to_start(make_daemon, app_for):
    d = make_daemon().start()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "Press N to write the first memory" in text_of(app.screen.query_one("#detail").content)
        await press(pilot, "N")
        app.screen.query_one("#title", Input).value = "第一条"
        await press(pilot, "ctrl+s")
        await until(pilot, lambda: text_of(app.screen.query_one("#detail").content).startswith("m1"),
                    what="the new memory in the detail pane")


async def test_go_to_takes_a_bare_number_and_words_a_missing_id_for_the_operator(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "g")
        await press(pilot, *ids["apple"].removeprefix("m"), "enter")
        assert app.screen.query_one(MemoryTree).cursor_item.id == ids["apple"]
        await press(pilot, "g", *"999", "enter")
        errors = app.noted("error")
        assert "'m999'" in errors and "does not exist or was deleted" in errors and "Search (2)" in errors
        assert "zcor_memory_query" not in errors and "Use zcor_" not in errors


async def test_deep_trees_cap_the_indent_and_show_the_path(make_daemon, app_for):
    d = make_daemon()
    with Service(d.memdir) as svc:
        parent = None
        for n in range(12):
            parent = svc.call("zcor_memory_write", {"title": f"层{n}", "content": "x", "parentId": parent})["id"]
    d.start()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.show_node("m12")
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        assert tree.cursor_item.id == "m12"
        lines = screen_text(app).splitlines()
        deepest = next(line for line in lines if "层11 m12" in line)
        sixth = next(line for line in lines if "层5 m6" in line)
        assert deepest.index("层11") <= sixth.index("层5") + tree.guide_depth  # indented no further
        assert deepest.index("层11") < 30  # readable in the tree's width at 80 columns
        detail = text_of(app.screen.query_one("#detail").content)
        assert "level 12:" in detail and "层0 › 层1 ›" in detail and "› 层11" in detail


async def test_sixth_important_mark_shows_the_replacement_receipt(memory, app_for):
    d, ids = memory
    with d.client("operator") as c:
        for name in ("dad", "work", "colleague"):
            c.call_tool("zcor_memory_important", {"id": ids[name], "important": True})
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert len(app.important) == 5
        app.show_node(ids["hobby"])
        await settle(pilot)
        await press(pilot, "i")
        warning = app.noted("warning")
        assert f"{ids['mom']} “妈妈” unmarked" in warning and "At most 5" in warning
        await until(pilot, lambda: ids["hobby"] in app.important and ids["mom"] not in app.important,
                    what="the status to follow the marks")
        tree = app.screen.query_one(MemoryTree)
        assert str(tree.nodes_by_id[ids["hobby"]].label).startswith("★")
        await pilot.press("i")  # and unmark
        await settle(pilot)
        assert f"{ids['hobby']} is no longer important" in app.noted()


async def test_move_merge_and_supersede(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.show_node(ids["apple"])
        await settle(pilot)
        await press(pilot, "m")
        picker = app.screen
        assert isinstance(picker, NodePicker)
        options = picker.query_one("#picker-options")
        offered = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert ids["hobby"] not in offered and ids["apple"] not in offered  # where it is, and itself
        assert offered[0] == "\x00root"
        picker.query_one("#picker-query", Input).value = "家人"
        await pilot.press("enter")  # at once: the search runs now, then its first entry is picked
        await settle(pilot)
        with d.client("operator") as c:
            assert c.call_tool("zcor_memory_read", {"id": ids["apple"]})["parentId"] == ids["family"]
        tree = app.screen.query_one(MemoryTree)
        await until(pilot, lambda: tree.nodes_by_id[ids["apple"]].parent is tree.nodes_by_id[ids["family"]],
                    what="the tree to show the move")

        # mark two, merge them
        app.show_node(ids["dad"])
        await settle(pilot)
        await pilot.press("x")
        app.show_node(ids["apple"])
        await settle(pilot)
        await press(pilot, "x", "M")
        form = app.screen
        form.query_one("#title", Input).value = "家里的事"
        form.query_one("#reason", Input).value = "合并"
        await press(pilot, "ctrl+s")
        merged = tree.cursor_item
        assert merged.title == "家里的事"
        assert "Merged" in app.noted()
        with d.client("operator") as c:
            assert c.call_tool("zcor_memory_read", {"id": ids["dad"]})["supersededBy"] == merged.id

        # supersede: the selected memory by another, picked by id
        app.show_node(ids["colleague"])
        await settle(pilot)
        await press(pilot, "S")
        form = app.screen
        form.query_one("#replacement", Input).value = ids["work"]
        form.query_one("#reason", Input).value = "不再需要"
        await press(pilot, "ctrl+s")
        with d.client("operator") as c:
            assert c.call_tool("zcor_memory_read", {"id": ids["colleague"]})["supersededBy"] == ids["work"]
        await until(pilot, lambda: tree.nodes_by_id[ids["colleague"]].data.item.superseded,
                    what="the tree to dim the superseded memory")


async def test_changes_by_the_bot_appear_without_refresh(memory, app_for):
    d, ids = memory
    app = app_for(d)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        tree.nodes_by_id[ids["family"]].expand()
        await settle(pilot)
        with d.client() as bot:
            node = bot.call_tool("zcor_memory_write", {"title": "姐姐", "content": "在上海读书",
                                                       "parentId": ids["family"]})
            bot.call_tool("zcor_memory_write", {"id": ids["dad"], "title": "老爸", "content": "退休了"})
        await until(pilot, lambda: node["id"] in tree.nodes_by_id, what="the bot's memory in the tree")
        await until(pilot, lambda: tree.nodes_by_id[ids["dad"]].data.item.title == "老爸",
                    what="the bot's edit in the tree")
        await until(pilot, lambda: (app.status or {}).get("nodes") == 11, what="the status counts")
        assert "11 memories" in screen_text(app)


async def test_a_root_with_many_children_is_paged(make_daemon, app_for):
    d = make_daemon()
    with Service(d.memdir) as svc:
        for n in range(260):
            svc.call("zcor_memory_write", {"title": f"第{n}条", "content": "x", "keywords": []})
    d.start()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        assert len(tree.root.children) == 201  # a page of 200 and "… 60 more"
        assert "60 more" in str(tree.root.children[-1].label)
        app.show_node("m250")  # beyond the shown page: paged in on demand
        await settle(pilot)
        assert tree.cursor_item.id == "m250" and len(tree.root.children) == 260
        app.screen.query_one("#tree").focus()
        await pilot.press("r")  # a refresh keeps what was paged in
        await settle(pilot)
        assert len(tree.root.children) == 260 and tree.cursor_item.id == "m250"


async def test_the_more_line_shows_the_next_page(make_daemon, app_for):
    d = make_daemon()
    with Service(d.memdir) as svc:
        for n in range(230):
            svc.call("zcor_memory_write", {"title": f"第{n}条", "content": "x", "keywords": []})
    d.start()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(MemoryTree)
        tree.go_to(tree.root.children[-1])
        await press(pilot, "enter")
        assert len(tree.root.children) == 230 and isinstance(tree.root.children[-1].data, Slot)
        assert tree.cursor_item.id == "m201"


async def test_a_very_deep_memory_opens_with_a_few_calls_and_a_short_tree(make_daemon, app_for):
    """Issue 23.12: `g` to the end of a long chain. The tree starts a few levels above the
    memory (Textual's Tree holds each line's whole path: 20,000 open levels cost 20,000²),
    so opening it costs one trace and a few children lists, whatever the depth."""
    depth = 300
    d = make_daemon()
    with Service(d.memdir) as svc:
        parent = None
        for n in range(depth):
            parent = svc.call("zcor_memory_write", {"title": f"层{n}", "content": "x", "parentId": parent,
                                                    "keywords": ["层"]})["id"]
    d.start()
    app = app_for(d)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        calls: list[str] = []
        real_call = app.client.call_tool

        async def counted(name, args=None, **kw):
            calls.append(name)
            return await real_call(name, args, **kw)

        app.client.call_tool = counted
        await press(pilot, "g", *str(depth), "enter")
        tree = app.screen.query_one(MemoryTree)
        assert tree.cursor_item.id == f"m{depth}"
        assert len(calls) < 15, calls  # not one call per level
        assert len(tree.nodes_by_id) <= LEVELS_ABOVE + 2
        assert tree.base.id == f"m{depth - LEVELS_ABOVE}" and tree.base_depth == depth - LEVELS_ABOVE - 1
        text = screen_text(app)
        assert f"⋮ {depth - LEVELS_ABOVE - 1:,} levels above" in text and f"层{depth - 1} m{depth}" in text
        detail = text_of(app.screen.query_one("#detail").content)
        assert f"level {depth}:" in detail and f"… {depth - 10:,} levels …" in detail

        await pilot.press("backspace")  # one level up; the cursor stays on the memory
        await settle(pilot)
        assert tree.base.id == f"m{depth - LEVELS_ABOVE - 1}" and tree.cursor_item.id == f"m{depth}"

        await pilot.press("g", "1", "enter")  # a root: the tree starts at the roots again
        await settle(pilot)
        assert tree.base is None and tree.cursor_item.id == "m1" and not tree.show_root
