// A tool result's structured content (any JSON) as something people can read: rows of similar
// objects as a table, an object of plain values as a two-column table, anything else as a tree.
// Every key and value is inserted as text.

import { el } from "./dom.js";

const MAX_ROWS = 200;
const MAX_COLUMNS = 20;
const MAX_NODES = 2000;
const MAX_DEPTH = 8;

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function isScalar(value) {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}

function compact(value) {
  if (value === null) return "—";
  if (typeof value === "string") return value;
  if (isScalar(value)) return String(value);
  const text = JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

function cell(tag, value) {
  const node = el(tag, null, compact(value));
  if (typeof value === "number") node.className = "num";
  return node;
}

// Rows of objects that share their keys: a table.
function isRows(value) {
  return Array.isArray(value) && value.length > 0 && value.every(isObject)
    && value.every((row) => Object.values(row).every((v) => isScalar(v) || JSON.stringify(v).length <= 200));
}

function rowsTable(rows) {
  const columns = [];
  for (const row of rows.slice(0, MAX_ROWS)) {
    for (const key of Object.keys(row)) {
      if (!columns.includes(key) && columns.length < MAX_COLUMNS) columns.push(key);
    }
  }
  const table = el("table");
  const head = el("thead");
  const headRow = el("tr");
  for (const key of columns) {
    const th = el("th", null, key);
    th.scope = "col";
    headRow.append(th);
  }
  head.append(headRow);
  const body = el("tbody");
  for (const row of rows.slice(0, MAX_ROWS)) {
    const tr = el("tr");
    for (const key of columns) tr.append(key in row ? cell("td", row[key]) : el("td"));
    body.append(tr);
  }
  table.append(head, body);
  return table;
}

function fieldsTable(object) {
  const table = el("table");
  const head = el("thead");
  const headRow = el("tr");
  for (const name of ["Field", "Value"]) {
    const th = el("th", null, name);
    th.scope = "col";
    headRow.append(th);
  }
  head.append(headRow);
  const body = el("tbody");
  for (const [key, value] of Object.entries(object).slice(0, MAX_ROWS)) {
    const tr = el("tr");
    const th = el("th", null, key);
    th.scope = "row";
    tr.append(th, cell("td", value));
    body.append(tr);
  }
  table.append(head, body);
  return table;
}

function treeValue(value, budget, depth) {
  if (isScalar(value)) {
    const type = value === null ? "null" : typeof value;
    return el("span", `tree-value t-${type}`, value === null ? "null" : typeof value === "string" ? JSON.stringify(value) : String(value));
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  if (!entries.length) return el("span", "tree-value t-empty", Array.isArray(value) ? "[ ]" : "{ }");
  if (depth >= MAX_DEPTH) return el("span", "tree-value", compact(value));
  if (isRows(value) && depth > 0) {
    const wrap = el("div", "structured nested");
    wrap.append(rowsTable(value));
    return wrap;
  }
  const list = el("ul");
  for (const [key, child] of entries) {
    if (budget.left <= 0) {
      list.append(el("li", "note", "… (more not shown)"));
      break;
    }
    budget.left -= 1;
    const item = el("li");
    item.append(el("span", "tree-key", `${key}: `), treeValue(child, budget, depth + 1));
    list.append(item);
  }
  return list;
}

// The view of one structured value (an element to append).
export function renderStructured(value) {
  const wrap = el("div", "structured");
  if (isRows(value)) {
    wrap.append(rowsTable(value));
    if (value.length > MAX_ROWS) wrap.append(el("p", "note", `${value.length - MAX_ROWS} more rows not shown.`));
  } else if (isObject(value) && Object.keys(value).length && Object.values(value).every(isScalar)) {
    wrap.append(fieldsTable(value));
  } else {
    const tree = treeValue(value, { left: MAX_NODES }, 0);
    if (tree.tagName === "UL") tree.classList.add("tree");
    wrap.append(tree);
  }
  return wrap;
}
