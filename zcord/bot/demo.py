"""`zcor-demo`: exercise a real Memory directory through the Service, no daemon needed.

Opens (or creates) the default Memory directory, seeds a few memories on first run, then
shows what a bot would get: a query, the auto-recall header for a message, and the prefix.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..core.errors import ZcorError
from ..service.service import Service


def default_memory_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(base) / "zcor" / "memory"


SEED = [
    {"title": "小明是我的大学室友", "content": "小明住在上海，喜欢打篮球，每周五晚上喝奶茶。",
     "keywords": ["小明", "室友"]},
    {"title": "小明的猫叫团子", "content": "一只橘猫，三岁，很怕洗澡。", "parentOf": 0},
    {"title": "周末计划", "content": "周六下午和朋友去看电影。"},
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="zcor-demo", description=__doc__)
    ap.add_argument("--memory-dir", type=Path, default=default_memory_dir())
    ap.add_argument("--message", default="昨天小明说他的猫咪生病了，我们周末去看它")
    args = ap.parse_args(argv)
    try:
        with Service(args.memory_dir) as svc:
            if not svc.state.nodes:
                ids: list[str] = []
                for item in SEED:
                    params = {k: v for k, v in item.items() if k != "parentOf"}
                    if "parentOf" in item:
                        params["parentId"] = ids[item["parentOf"]]
                    ids.append(svc.call("zcor_memory_write", params)["id"])
                svc.call("zcor_memory_important", {"id": ids[0], "important": True})
            print(f"Memory directory: {svc.dir}")
            print(json.dumps(svc.status(), ensure_ascii=False, indent=2))
            print("\n== zcor_memory_query(keywords=['小明']) ==")
            for item in svc.call("zcor_memory_query", {"keywords": ["小明"]})["items"]:
                print(f"  {item['id']}  {item['title']}  (updated {item['updatedAt']})")
            print(f"\n== auto-recall for: {args.message} ==")
            svc.recall("demo", [{"text": args.message, "origin": "external"}])
            print(svc.context("demo")["text"] or "(nothing recalled)")
            print("\n== system prefix ==")
            print(svc.prefix())
    except ZcorError as e:
        print(f"zcor-demo: {e.message}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
