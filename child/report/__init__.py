"""A build's report, made in a `publish` job's child: the page and the folder it stands in.

- `publish`: the job's handler: copies the pictures, writes the page, points `latest` at it;
- `paths`: the page's relative links, to its pictures and to the project's other reports;
- `render`: the page (header, filter, groups), with `report.css` and `report.js` inlined;
- `snapshot`: one snapshot's section, crop, full images and overlay;
- `review`: the review state and decisions, and how to review: the commands, the buttons;
- `crop`: the arithmetic of the enlarged crop of a changed area;
- `report.css`, `report.js`: the page's look and behaviour (filter, keys, overlay, zoom,
  images loaded on demand, review when served), kept as files of their own so that each reads
  as what it is.
"""
