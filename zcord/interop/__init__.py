"""Moving lore in and out of zcor (issue 36): the file formats, with no daemon in them.

- `readers`: a SillyTavern World Info file, Character Card V2/V3 (JSON, or PNG with the
  card in its `chara` / `ccv3` text chunk), a standalone `lorebook_v3` and zcor's own JSONL
  export, read by content into a `Book` of plain entries; every refusal names the entry
  and field.
- `writers`: a Memory as `lorebook_v3`, SillyTavern World Info, zcor JSONL or a folder of
  Markdown files with YAML front matter.

zcord.service.interop runs an import as one logged operation and an export under the lock.
"""
