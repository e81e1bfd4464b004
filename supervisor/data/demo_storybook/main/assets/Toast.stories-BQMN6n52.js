import{f as t}from"./components-BOGzifKY.js";const a={title:"Demo/Toast",render:e=>t(e)},o={args:{text:"Changes saved"}},r=["Saved"];export{o as Saved,r as __namedExportsOrder,a as default};
