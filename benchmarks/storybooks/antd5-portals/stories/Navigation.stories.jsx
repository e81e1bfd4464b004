import React from 'react';
import { Breadcrumb, Menu, Pagination, Steps, Tabs } from 'antd';
import { AppstoreOutlined, MailOutlined, SettingOutlined } from '@ant-design/icons';

export default { title: 'Navigation/Menus' };

const tabItems = ['Overview', 'Members', 'Billing', 'Settings'].map((t, i) => ({ key: String(i), label: t, children: `${t} content` }));

export const TabsLine = { render: () => <Tabs defaultActiveKey="1" items={tabItems} /> };
export const TabsCard = { render: () => <Tabs type="card" defaultActiveKey="2" items={tabItems} /> };
export const TabsEditable = { render: () => <Tabs type="editable-card" defaultActiveKey="0" items={tabItems} /> };
export const TabsVertical = { render: () => <Tabs tabPosition="left" defaultActiveKey="3" items={tabItems} style={{ height: 220 }} /> };

const menuItems = [
  { key: 'mail', label: 'Mail', icon: <MailOutlined /> },
  { key: 'app', label: 'Apps', icon: <AppstoreOutlined />, children: [{ key: 'a1', label: 'Calendar' }, { key: 'a2', label: 'Drive' }] },
  { key: 'set', label: 'Settings', icon: <SettingOutlined />,
    children: [{ type: 'group', label: 'Account', children: [{ key: 's1', label: 'Profile' }, { key: 's2', label: 'Security' }] }] },
];

export const MenuHorizontal = { render: () => <Menu mode="horizontal" defaultSelectedKeys={['mail']} items={menuItems} /> };
export const MenuInline = {
  render: () => <Menu mode="inline" style={{ width: 256 }} defaultOpenKeys={['app', 'set']} defaultSelectedKeys={['a2']} items={menuItems} />,
};
// A vertical menu's open submenu is a popup in a portal on <body>.
export const MenuVerticalPopup = {
  render: () => <div style={{ height: 300 }}><Menu mode="vertical" style={{ width: 220 }} openKeys={['app']} items={menuItems} /></div>,
};
export const MenuHorizontalPopup = {
  render: () => <div style={{ height: 260 }}><Menu mode="horizontal" openKeys={['set']} items={menuItems} /></div>,
};
export const MenuDark = {
  render: () => <Menu theme="dark" mode="inline" style={{ width: 256 }} defaultOpenKeys={['app']} defaultSelectedKeys={['a1']} items={menuItems} />,
};
export const Breadcrumbs = {
  render: () => <Breadcrumb items={[{ title: 'Home' }, { title: 'Projects', href: '#' }, { title: 'storyshelf', href: '#' }, { title: 'Builds' }]} />,
};
export const StepsHorizontal = {
  render: () => <Steps current={1} items={[{ title: 'Upload', description: '35 files' }, { title: 'Capture', description: 'In progress' }, { title: 'Review' }]} />,
};
export const StepsVerticalError = {
  render: () => <Steps direction="vertical" current={2} status="error" items={[{ title: 'Plan' }, { title: 'Capture' }, { title: 'Diff', description: 'Out of memory' }]} />,
};
export const Paginations = { render: () => <Pagination defaultCurrent={6} total={500} showSizeChanger showQuickJumper /> };
