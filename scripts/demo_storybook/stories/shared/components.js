// The demo's components: plain DOM, styled by components.css from the variant's tokens.

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function createButton({ label = 'Button', variant = 'primary' } = {}) {
  const button = element('button', `demo-button demo-button--${variant}`, label);
  button.type = 'button';
  return button;
}

export function createBadge({ label = 'Badge', tone = 'neutral' } = {}) {
  return element('span', `demo-badge demo-badge--${tone}`, label);
}

export function createCard({ eyebrow = '', title = 'Card', text = '', action = 'Read more' } = {}) {
  const card = element('article', 'demo-card');
  if (eyebrow) card.append(element('p', 'demo-card__eyebrow', eyebrow));
  card.append(element('h3', 'demo-card__title', title), element('p', 'demo-card__text', text));
  const footer = element('footer', 'demo-card__footer');
  footer.append(createBadge({ label: '4 min read' }), createButton({ label: action, variant: 'secondary' }));
  card.append(footer);
  return card;
}

export function createAlert({ tone = 'info', title = '', text = '' } = {}) {
  const alert = element('div', `demo-alert demo-alert--${tone}`);
  alert.setAttribute('role', 'status');
  const icon = element('span', 'demo-alert__icon', tone === 'info' ? 'i' : '!');
  const body = element('div', 'demo-alert__body');
  body.append(element('strong', 'demo-alert__title', title), element('p', 'demo-alert__text', text));
  alert.append(icon, body);
  return alert;
}

export function createField({ label = 'Label', type = 'text', value = '', placeholder = '', help = '' } = {}) {
  const field = element('label', 'demo-field');
  const input = element('input', 'demo-field__input');
  input.type = type;
  input.value = value;
  input.placeholder = placeholder;
  field.append(element('span', 'demo-field__label', label), input);
  if (help) field.append(element('span', 'demo-field__help', help));
  return field;
}

export function createToast({ text = 'Saved' } = {}) {
  const toast = element('div', 'demo-toast');
  toast.setAttribute('role', 'status');
  toast.append(element('span', 'demo-toast__check'), element('span', '', text));
  return toast;
}

export function row(...children) {
  const wrapper = element('div', 'demo-row');
  wrapper.append(...children);
  return wrapper;
}
