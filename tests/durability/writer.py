"""A child process that writes to a Memory in a loop and acknowledges each committed call.

Each line on stdout is one acknowledged call: `<op> <json result>`. The parent kills this
process with SIGKILL at a random instant and checks that every acknowledged call survived.
"""

import json
import random
import sys

from zcord.service import Service

memdir, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
svc = Service(memdir).open()
ids = [n.id for n in svc.state.nodes.values() if n.superseded_by is None]
n = 0
while True:
    n += 1
    roll = rng.random()
    if roll < 0.5 or len(ids) < 3:
        params = {"title": f"s{seed}-n{n}", "content": "内容 " * rng.randint(1, 200), "keywords": [f"k{n}"]}
        if ids and rng.random() < 0.3:
            params["parentId"] = rng.choice(ids)
        res = svc.call("zcor_memory_write", params)
        ids.append(res["id"])
        op = "create"
    elif roll < 0.8:
        target = rng.choice(ids)
        res = svc.call("zcor_memory_write", {"id": target, "title": f"s{seed}-u{n}", "content": f"updated {n}"})
        op = "update"
    elif roll < 0.9:
        res = svc.call("zcor_memory_important", {"id": rng.choice(ids), "important": True})
        op = "important"
    else:
        pid = f"p{rng.randint(1, 20)}"
        res = svc.call("zcor_relationship_write", {"personId": pid, "name": f"name{n}", "relationship": "friend",
                                                   "affinity": rng.randint(-100, 100), "reason": f"r{n}"})
        op = "relationship"
    sys.stdout.write(op + " " + json.dumps(res, ensure_ascii=False) + "\n")
    sys.stdout.flush()
