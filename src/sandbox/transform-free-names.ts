/**
 * Phase 5 of the action transform (transform.ts): a name the guest reads that nothing declares
 * (the wrapper's bindings, the guest's own declarations and parameters, the guest's globals)
 * becomes `REF("name")`, which throws a real `ReferenceError: name is not defined` — SES alone
 * would read it as `undefined`, and a name the global object only inherits (`__proto__`,
 * `toString`, `constructor`) as Object.prototype's. In two named steps: {@link boundNames} (what is declared anywhere),
 * then {@link FreeNameGuard} (the rewrite, one method per kind of node that binds, assigns or reads
 * names; every other node just has its children visited).
 */
import { GUEST_STANDARD_GLOBALS } from "./contract.ts";
import { id, patternNames, str, walk, type AnyNode } from "./transform-ast.ts";

/**
 * Rewrites every free name read in `body` (in place).
 * @param known names bound by the wrapper or present in the guest's global scope
 * @param REF the wrapper's name for its `ref` helper
 */
export function guardFreeReferences(body: AnyNode[], known: Set<string>, REF: string): void {
  const guard = new FreeNameGuard(boundNames(body, known), REF);
  for (let i = 0; i < body.length; i++) body[i] = guard.expression(body[i]);
}

/**
 * Step 1: `known` plus every name declared anywhere in `body` (variables, functions, classes,
 * parameters, catch parameters). Scopes are not told apart: a name declared in any scope is never
 * guarded, which can leave a free read unguarded (it reads `undefined`, as SES would) but never
 * guards a bound one.
 */
function boundNames(body: AnyNode[], known: Set<string>): Set<string> {
  const bound = new Set<string>(known);
  const addPattern = (pattern: AnyNode) => {
    const names: string[] = [];
    patternNames(pattern, names);
    for (const name of names) bound.add(name);
  };
  for (const stmt of body)
    walk(stmt, (n) => {
      switch (n.type) {
        case "VariableDeclarator":
          addPattern(n.id);
          break;
        case "FunctionDeclaration":
        case "FunctionExpression":
        case "ArrowFunctionExpression":
          if (n.id) bound.add(n.id.name);
          for (const p of n.params) addPattern(p);
          break;
        case "ClassDeclaration":
        case "ClassExpression":
          if (n.id) bound.add(n.id.name);
          break;
        case "CatchClause":
          if (n.param) addPattern(n.param);
          break;
      }
    });
  return bound;
}

type Rewrite = (node: AnyNode) => AnyNode;

/** Step 2: the rewrite. `expression` returns the replacement of a node in expression position. */
class FreeNameGuard {
  constructor(
    private readonly bound: Set<string>,
    private readonly REF: string,
  ) {}

  private isFree(name: string): boolean {
    return !this.bound.has(name) && !GUEST_STANDARD_GLOBALS.has(name);
  }

  private refCall(name: string, loc: AnyNode): AnyNode {
    return {
      type: "CallExpression",
      callee: id(this.REF),
      arguments: [str(name)],
      optional: false,
      loc,
    };
  }

  /** The replacement for `node`: a free identifier becomes a `REF` call; others are rewritten inside. */
  readonly expression = (node: AnyNode): AnyNode => {
    if (node == null || typeof node !== "object") return node;
    if (node.type === "Identifier")
      return this.isFree(node.name) ? this.refCall(node.name, node.loc) : node;
    if (LEAVES.has(node.type)) return node;
    const rewrite = this.byType[node.type];
    return rewrite ? rewrite(node) : this.children(node);
  };

  /** Any other node: each child node in turn. */
  private children(node: AnyNode): AnyNode {
    for (const key of Object.keys(node)) {
      if (key === "loc") continue;
      const v = node[key];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++)
          if (v[i] && typeof v[i].type === "string") v[i] = this.expression(v[i]);
      } else if (v && typeof v === "object" && typeof v.type === "string")
        node[key] = this.expression(v);
    }
    return node;
  }

  /** Patterns bind or assign names; only their default values and computed keys are expressions. */
  private readonly pattern = (p: AnyNode): void => {
    if (!p) return;
    switch (p.type) {
      case "ObjectPattern":
        for (const prop of p.properties) {
          if (prop.type === "RestElement") this.pattern(prop.argument);
          else {
            if (prop.computed) prop.key = this.expression(prop.key);
            this.pattern(prop.value);
          }
        }
        return;
      case "ArrayPattern":
        for (const el of p.elements) this.pattern(el);
        return;
      case "RestElement":
        this.pattern(p.argument);
        return;
      case "AssignmentPattern":
        this.pattern(p.left);
        p.right = this.expression(p.right);
        return;
      case "MemberExpression":
        this.member(p);
        return;
    }
  };

  /** `a.b` reads `a` (and a computed key), never the name `b`. */
  private readonly member: Rewrite = (node) => {
    node.object = this.expression(node.object);
    if (node.computed) node.property = this.expression(node.property);
    return node;
  };

  /** In an object literal (patterns go through {@link pattern}): `{ x }` reads `x`. */
  private readonly property: Rewrite = (node) => {
    if (node.computed) node.key = this.expression(node.key);
    if (node.shorthand && node.value.type === "Identifier" && this.isFree(node.value.name)) {
      node.shorthand = false;
      node.value = this.refCall(node.value.name, node.value.loc);
    } else node.value = this.expression(node.value);
    return node;
  };

  /** A class member: its (computed) key and its value. */
  private readonly classMember: Rewrite = (node) => {
    if (node.computed) node.key = this.expression(node.key);
    node.value = this.expression(node.value);
    return node;
  };

  /**
   * `typeof notDefined` must stay "undefined", not throw: a free name becomes `REF("name", true)`,
   * which gives undefined for a name the guest's global scope does not have.
   */
  private readonly unary: Rewrite = (node) => {
    if (node.operator === "typeof" && node.argument.type === "Identifier") {
      const arg = node.argument;
      if (this.isFree(arg.name)) {
        node.argument = this.refCall(arg.name, arg.loc);
        node.argument.arguments.push({ type: "Literal", value: true, raw: "true" });
      }
      return node;
    }
    node.argument = this.expression(node.argument);
    return node;
  };

  /** An undeclared assignment target already throws ReferenceError (SES's set trap). */
  private readonly assignment: Rewrite = (node) => {
    if (node.left.type === "MemberExpression") node.left = this.expression(node.left);
    else this.pattern(node.left);
    node.right = this.expression(node.right);
    return node;
  };

  private readonly update: Rewrite = (node) => {
    if (node.argument.type !== "Identifier") node.argument = this.expression(node.argument);
    return node;
  };

  /**
   * SES rejects direct `eval(...)` (a regex over the source); an indirect `(0, eval)(...)`
   * evaluates in the compartment's global scope, which is what a sandboxed eval can offer.
   * (Strict code cannot declare its own `eval`, so this name is always the global one.)
   */
  private readonly call: Rewrite = (node) => {
    if (node.callee.type === "Identifier" && node.callee.name === "eval") {
      node.callee = {
        type: "SequenceExpression",
        expressions: [{ type: "Literal", value: 0, raw: "0" }, node.callee],
      };
    } else node.callee = this.expression(node.callee);
    node.arguments = node.arguments.map(this.expression);
    return node;
  };

  private readonly declarator: Rewrite = (node) => {
    this.pattern(node.id);
    node.init = this.expression(node.init);
    return node;
  };

  private readonly fn: Rewrite = (node) => {
    for (const p of node.params) this.pattern(p);
    node.body = this.expression(node.body);
    return node;
  };

  private readonly cls: Rewrite = (node) => {
    node.superClass = this.expression(node.superClass);
    node.body = this.expression(node.body);
    return node;
  };

  private readonly catchClause: Rewrite = (node) => {
    if (node.param) this.pattern(node.param);
    node.body = this.expression(node.body);
    return node;
  };

  private readonly forInOf: Rewrite = (node) => {
    if (node.left.type === "VariableDeclaration") this.expression(node.left);
    else if (node.left.type === "MemberExpression") node.left = this.expression(node.left);
    else this.pattern(node.left);
    node.right = this.expression(node.right);
    node.body = this.expression(node.body);
    return node;
  };

  /** A label is not a name read. */
  private readonly labeled: Rewrite = (node) => {
    node.body = this.expression(node.body);
    return node;
  };

  /** Node types that bind, assign or name something other than a read, and how each is rewritten. */
  private readonly byType: Record<string, Rewrite> = {
    MemberExpression: this.member,
    Property: this.property,
    MethodDefinition: this.classMember,
    PropertyDefinition: this.classMember,
    UnaryExpression: this.unary,
    AssignmentExpression: this.assignment,
    UpdateExpression: this.update,
    CallExpression: this.call,
    VariableDeclarator: this.declarator,
    FunctionDeclaration: this.fn,
    FunctionExpression: this.fn,
    ArrowFunctionExpression: this.fn,
    ClassDeclaration: this.cls,
    ClassExpression: this.cls,
    CatchClause: this.catchClause,
    ForInStatement: this.forInOf,
    ForOfStatement: this.forInOf,
    LabeledStatement: this.labeled,
  };
}

/** Nodes with no names read inside (labels of break/continue, `new.target`, literals, `super`, `this`). */
const LEAVES = new Set([
  "BreakStatement",
  "ContinueStatement",
  "MetaProperty",
  "Literal",
  "TemplateElement",
  "Super",
  "ThisExpression",
]);
