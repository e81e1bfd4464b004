import React from 'react';
import { Button, ColorPicker, Dropdown, Popconfirm, Popover, Space, Tooltip } from 'antd';
import { DownOutlined, SettingOutlined, UserOutlined } from '@ant-design/icons';

export default { title: 'Overlays/Popups' };

const Stage = ({ children }) => (
  <div style={{ width: 640, height: 360, display: 'flex', alignItems: 'center', justifyContent: 'center' }}>{children}</div>
);

export const TooltipTop = { render: () => <Stage><Tooltip open title="Copy the link"><Button>Share</Button></Tooltip></Stage> };
export const TooltipRight = { render: () => <Stage><Tooltip open placement="right" title="Right side"><Button>Hover</Button></Tooltip></Stage> };
export const TooltipColors = {
  render: () => (
    <Stage>
      <Space size={48}>
        {['pink', 'cyan', 'gold', 'purple'].map((c) => <Tooltip key={c} open color={c} title={c}><Button>{c}</Button></Tooltip>)}
      </Space>
    </Stage>
  ),
};
export const PopoverOpen = {
  render: () => (
    <Stage>
      <Popover open title="Mara Lindqvist" content={<div><p>Admin since 2021</p><p>Uppsala</p></div>}>
        <Button icon={<UserOutlined />}>Profile</Button>
      </Popover>
    </Stage>
  ),
};
export const PopconfirmOpen = {
  render: () => <Stage><Popconfirm open title="Delete the task" description="Are you sure?"><Button danger>Delete</Button></Popconfirm></Stage>,
};

const items = [
  { key: '1', label: 'Profile', icon: <UserOutlined /> },
  { key: '2', label: 'Settings', icon: <SettingOutlined /> },
  { type: 'divider' },
  { key: '3', label: 'More', children: [{ key: '3-1', label: 'Billing' }, { key: '3-2', label: 'Team' }] },
  { key: '4', label: 'Sign out', danger: true },
];

export const DropdownOpen = {
  render: () => <Stage><Dropdown open menu={{ items }}><Button>Account <DownOutlined /></Button></Dropdown></Stage>,
};
export const DropdownButtonOpen = {
  render: () => <Stage><Dropdown.Button open menu={{ items }}>Actions</Dropdown.Button></Stage>,
};
export const ColorPickerOpen = {
  render: () => <Stage><ColorPicker open defaultValue="#1677ff" showText /></Stage>,
};
